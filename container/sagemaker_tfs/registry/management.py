"""The management routes of a multi-model endpoint, served by the registry owner in `serve`'s process (nginx
sends `/models` and `/models/{name}` to its UNIX socket), so that a load never runs in a gunicorn worker and is
never cut by the worker timeout: it may take SAGEMAKER_TFS_WAIT_TIME_SECONDS.

  POST   /models           load (owner.load: the checks of docs/multi-model.md §3)
  GET    /models           list, paginated (`limit`, `next_page_token`)
  GET    /models/{name}    describe
  DELETE /models/{name}    unload
"""

from __future__ import annotations

import json
import logging
from typing import Any

import falcon

from ..errors import HandlerError
from ..shared import json_bodies
from ..shared.media_types import JSON
from ..web.answers import Answer
from ..web.app import WebApp
from ..web.metrics import Timings
from ..web.request import log_target_model
from .owner import Owner

log = logging.getLogger("sagemaker_tfs.multi_model")

MAX_BODY = 65536  # a load request is {"model_name": ..., "url": ...}; nginx passes bodies of any size here


def _json(body: dict[str, Any]) -> Answer:
    return 200, json_bodies.encode(body), JSON


class Models:
    def __init__(self, owner: Owner):
        self._owner = owner

    def listing(self, env: dict, rid: str, timings: Timings | None) -> Answer:
        log_target_model(env, rid)
        req = falcon.Request(env)  # Falcon's parser of the query string
        return _json(self._owner.list(req.get_param("limit"), req.get_param("next_page_token")))

    def load(self, env: dict, rid: str, timings: Timings | None) -> Answer:
        log_target_model(env, rid)
        data = falcon.Request(env).bounded_stream.read(MAX_BODY + 1)
        if len(data) > MAX_BODY:
            raise HandlerError(
                413, f"The request body is larger than {MAX_BODY} bytes, the most a /models request may send"
            )
        try:
            body = json.loads(data)
        except ValueError:
            body = None  # check 1 answers it
        return _json(self._owner.load(body))


class Model:
    def __init__(self, owner: Owner):
        self._owner = owner

    def describe(self, env: dict, rid: str, timings: Timings | None, name: str) -> Answer:
        log_target_model(env, rid)
        return _json(self._owner.describe(name))

    def unload(self, env: dict, rid: str, timings: Timings | None, name: str) -> Answer:
        log_target_model(env, rid)
        return _json(self._owner.unload(name))


def create_app(owner: Owner) -> WebApp:
    """The routes' app (request ids in every answer; LoadError is a HandlerError: its status and {"error": text})."""
    app = WebApp()
    models, model = Models(owner), Model(owner)
    app.add_route("/models", GET=models.listing, POST=models.load)
    app.add_route("/models/{name}", GET=model.describe, DELETE=model.unload)
    return app
