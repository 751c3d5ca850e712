"""What the apps share (the app of the gunicorn workers, and `serve`'s /models API and runtime API).

app.py          the WSGI app: routing, the one path of every answer (its headers, the mapping of errors), timings
answers.py      handler return values and errors as (status, body, content type), with headers of their own
request.py      the request id, the request's path, the target model of a multi-model request
bodies.py       the request body as handlers read it
metrics.py      the app's per-worker metrics and the stages' timings (SAGEMAKER_METRICS, Server-Timing)
unix_server.py  an app on a UNIX socket served by threads of `serve` (the /models API, the runtime API)
"""
