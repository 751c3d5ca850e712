"""What the Falcon apps share (the app of the gunicorn workers, and `serve`'s /models API and runtime API).

middleware.py   the request id, the error handlers (every error mapped to its JSON answer once), timings
answers.py      handler return values and errors as (status, body, content type)
bodies.py       the request body as handlers read it
metrics.py      the app's per-worker metrics and the stages' timings (SAGEMAKER_METRICS, Server-Timing)
unix_server.py  an app on a UNIX socket served by threads of `serve` (the /models API, the runtime API)
"""
