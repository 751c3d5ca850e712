"""The Falcon app the gunicorn workers run, between nginx and the model servers.

routes.py         create_app() (gunicorn's factory, single- and multi-model), /ping, /execution-parameters
invocations.py    POST /invocations: Context from the headers, the handler chain, its answer
multi_model.py    a multi-model endpoint's POST /models/{name}/invoke, following the registry
context.py        the Context namedtuple and the custom-attribute rules
script.py         finding and importing code/inference.py, its contract
"""
