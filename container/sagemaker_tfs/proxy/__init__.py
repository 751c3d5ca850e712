"""The Falcon app between nginx and the model servers: routes, Context, the handler script, the model server client.

    app.py            create_app() (gunicorn's factory), /ping, /execution-parameters, error handlers
    invocations.py    POST /invocations: Context from the headers, the handler chain, answers and errors
    context.py        the Context namedtuple and the custom-attribute rules
    script.py         finding and importing code/inference.py, its contract
    answers.py        handler return values and errors as (status, body, content type)
    model_servers.py  the model server instances and the keep-alive HTTP client to them
"""
