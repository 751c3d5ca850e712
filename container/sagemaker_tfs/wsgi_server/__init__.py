"""What runs in gunicorn: our worker class and gunicorn's settings.

worker.py             the `connections` worker class: a thread per connection, httptools, the app called inline
gunicorn_settings.py  gunicorn's settings file: ready marks, heartbeat during start-up, JSON refusals, restarts
refusals.py           the JSON answer to a request refused before the app
"""
