"""SageMaker Runtime's API on the container's port: the local twin of an endpoint (SAGEMAKER_LOCAL_RUNTIME_API=true),
so that boto3's `sagemaker-runtime` client and the SageMaker SDK's Predictor work unchanged against a local
container (README: Testing your client locally). InvokeEndpoint runs in the app's workers (nginx sends it there, or
down the direct route: stack/runtime_route.py), which call their own app in-process; the rest runs in `serve`'s
process, on threads of its own, behind its UNIX socket: InvokeEndpointAsync (its queue has one owner) and a
multi-model target no worker routes yet (loaded through the registry), calling the container's own routes on nginx's
port, as SageMaker's front end calls a container.

    server.py        serve's app and its socket, started and stopped with the stack
    realtime.py      InvokeEndpoint, in a worker's app (serve_in) and in serve's
    asynchronous.py  InvokeEndpointAsync: the bounded queue, its threads, the outputs and failures written
    target_models.py a multi-model endpoint's TargetModel, loaded through the registry on first use
    container.py     calling the container: on nginx's port, or a worker's own app in-process
    errors.py        SageMaker Runtime's error answers, as botocore parses them
"""
