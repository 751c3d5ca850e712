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
from ..web import answers, middleware
from ..web.middleware import log_target_model
from .owner import Owner

log = logging.getLogger("sagemaker_tfs.multi_model")

MAX_BODY = 65536  # a load request is {"model_name": ..., "url": ...}; nginx passes bodies of any size here


def _json(resp: falcon.Response, body: dict[str, Any]) -> None:
    resp.data = json_bodies.encode(body)
    resp.content_type = answers.JSON


class Models:
    def __init__(self, owner: Owner):
        self._owner = owner

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        log_target_model(req.env, req.context.request_id)
        _json(resp, self._owner.list(req.get_param("limit"), req.get_param("next_page_token")))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        log_target_model(req.env, req.context.request_id)
        data = req.bounded_stream.read(MAX_BODY + 1)
        if len(data) > MAX_BODY:
            raise HandlerError(
                413, f"The request body is larger than {MAX_BODY} bytes, the most a /models request may send"
            )
        try:
            body = json.loads(data)
        except ValueError:
            body = None  # check 1 answers it
        _json(resp, self._owner.load(body))


class Model:
    def __init__(self, owner: Owner):
        self._owner = owner

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        log_target_model(req.env, req.context.request_id)
        _json(resp, self._owner.describe(name))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        log_target_model(req.env, req.context.request_id)
        _json(resp, self._owner.unload(name))


def create_app(owner: Owner) -> falcon.App:
    app = falcon.App(media_type=answers.JSON)
    middleware.install(app)  # request ids; LoadError is a HandlerError: its status and {"error": text}
    app.add_route("/models", Models(owner))
    app.add_route("/models/{name}", Model(owner))
    return app
