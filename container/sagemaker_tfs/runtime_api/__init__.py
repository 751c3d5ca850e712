"""SageMaker Runtime's API on the container's port: the local twin of an endpoint (SAGEMAKER_LOCAL_RUNTIME_API=true),
so that boto3's `sagemaker-runtime` client and the SageMaker SDK's Predictor work unchanged against a local
container (README: Testing your client locally). It runs in `serve`'s process, on threads of its own: nginx sends
`/endpoints/...` to its UNIX socket, and it calls the container's own routes on nginx's port, as SageMaker's front
end calls a container.

    server.py        the app and its socket, started and stopped with the stack
    realtime.py      InvokeEndpoint
    asynchronous.py  InvokeEndpointAsync: the bounded queue, its threads, the outputs and failures written
    target_models.py a multi-model endpoint's TargetModel, loaded through the registry on first use
    container.py     calling the container on nginx's port
    errors.py        SageMaker Runtime's error answers, as botocore parses them
"""
