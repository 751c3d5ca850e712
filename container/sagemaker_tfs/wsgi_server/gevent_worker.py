"""gunicorn's `gevent` worker class (`SAGEMAKER_GUNICORN_WORKER_CLASS=gevent`) with the stack's JSON error bodies
(gunicorn_workers.py), in a module of its own: importing gunicorn's imports gevent, which the other classes do not
need."""

from __future__ import annotations

from gunicorn.workers import ggevent

from .gunicorn_workers import JsonRefusals


class GeventWorker(JsonRefusals, ggevent.GeventWorker):
    """gunicorn's `gevent`, with JSON error bodies."""
