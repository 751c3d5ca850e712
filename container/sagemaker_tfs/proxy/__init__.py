"""The Falcon app between nginx and the model servers: routes, Context, the handler script, the model server client.

    app.py            create_app() (gunicorn's factory), /ping, /execution-parameters
    invocations.py    POST /invocations: Context from the headers, the handler chain, its answer
    context.py        the Context namedtuple and the custom-attribute rules
    script.py         finding and importing code/inference.py, its contract
    answers.py        handler return values and errors as (status, body, content type)
    middleware.py     the request id middleware and the error handlers: every error mapped to its answer once
    model_servers.py  the model server instances and the client that calls them (errors in the app's terms)
    http_client.py    the HTTP/1.1 keep-alive client (per-thread connections, no locks)
"""
