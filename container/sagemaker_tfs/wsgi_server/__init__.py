"""What runs in gunicorn: our worker class, gunicorn's own ones, and gunicorn's settings.

loop.py               the `loop` worker class (the default): one event loop serves every connection
                      (shared/cooperative.py)
http_connection.py    HTTP/1.1 on a client connection: requests parsed by httptools as they arrive, the app's answer
gunicorn_workers.py   gunicorn's `sync` and `gthread` classes with JSON error bodies (gevent_worker.py: `gevent`)
gunicorn_settings.py  gunicorn's settings file: ready marks, heartbeat during start-up, worker slots, restarts
refusals.py           the JSON answer to a request refused before the app
"""

# nginx's keepalive_timeout for its idle connections to the app: shorter than a stopping worker's wait for its idle
# connections to close (loop.py, drain), so that nginx, not the worker, ends each one and never sends into a closing one
APP_KEEPALIVE_SECONDS = 2
