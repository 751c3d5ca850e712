"""POST /invocations for a toolkit script: `input_fn` -> `predict_fn` -> `output_fn`, or `transform_fn`.

Exceptions are answered by the app's one error mapping (web/app.error_answer): HandlerError (the toolkit's errors
are HandlerErrors) with its status, falcon.HTTPError with its own, anything else 500.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import HandlerError
from ..model_client.model_servers import ModelServer, ModelServerClient
from ..shared import gpus, media_types
from ..shared.cooperative import script_step
from ..web import answers
from ..web.bodies import body_stream
from ..web.metrics import Timings
from ..web.sessions import request_session, with_session_headers
from .context import Context
from .functions import ToolkitFunctions
from .lifecycle import Loaded, StartupFailure, log, start
from .served_model import ServedModel

ANY = "*/*"
TEXT_TYPES = (media_types.JSON, media_types.CSV)  # what input_fn receives as str rather than bytes


def input_data(body: bytes, content_type: str) -> str | bytearray:
    """What input_fn and transform_fn receive: str for JSON and CSV (decoded with the charset parameter,
    default UTF-8), else a bytearray of the body, as the toolkit gives."""
    if media_types.base(content_type) not in TEXT_TYPES:
        return bytearray(body)
    charset = "utf-8"
    for name, value in media_types.parameters(content_type):
        if name == "charset" and value:
            charset = value.strip('"')
    try:
        return body.decode(charset)
    except LookupError:
        raise HandlerError(400, f"unknown charset {charset!r} in Content-Type {content_type!r}") from None
    except UnicodeDecodeError as exc:
        raise HandlerError(
            400, f"the request body is not {charset} text: invalid byte at position {exc.start}"
        ) from None


class ToolkitInvocations:
    """The /invocations resource of one worker, shared by its threads: each request gets its own Context."""

    def __init__(self, loaded: Loaded, default_accept: str, session_expiry: float = 1200.0):
        self._loaded = loaded
        self._session_expiry = session_expiry
        self._default_accept = default_accept
        self._step = script_step(answers.END)  # an output_fn or transform_fn may return an iterator (answers.py)
        functions = loaded.functions
        if not functions.transform_fn and not (functions.input_fn and functions.output_fn):
            from . import arrays  # the defaults use numpy (ImportError without it): only scripts that need them

            self._decode, self._encode = arrays.decode, arrays.default_output
        self._who = (
            "transform_fn"
            if functions.transform_fn
            else "output_fn"
            if functions.output_fn
            else "the default output_fn"
        )

    def answer(self, env: dict, rid: str, timings: Timings | None) -> answers.Answer | answers.Reply:
        content_type = env.get("CONTENT_TYPE") or media_types.JSON
        accept = env.get("HTTP_ACCEPT")
        if not accept or accept == ANY:
            accept = self._default_accept
        data = input_data(body_stream(env).read(), content_type)
        loaded = self._loaded
        context = Context(loaded.system_properties, loaded.model_name, env, request_session(env, self._session_expiry))
        result = self._call(context, data, content_type, accept)
        status, body, response_type = answers.from_return_value(result, accept, self._who, self._step)
        if context.response_status is not None:
            status = context.response_status[0]
        answer = status, body, context.response_content_type or response_type
        return with_session_headers(answer, context.session_state)

    def _call(self, context: Context, data: Any, content_type: str, accept: str) -> Any:
        loaded = self._loaded
        f = loaded.functions
        if f.transform_fn:
            return f.transform_fn(context, loaded.model, data, content_type, accept)
        decoded = f.input_fn(context, data, content_type) if f.input_fn else self._decode(data, content_type)
        prediction = f.predict_fn(context, decoded, loaded.model) if f.predict_fn else loaded.model.predict(decoded)
        return f.output_fn(context, prediction, accept) if f.output_fn else self._encode(prediction, accept)


def start_invocations(
    functions: ToolkitFunctions,
    model_dir: str,
    model_name: str,
    servers: list[ModelServer],
    client: ModelServerClient,
    default_accept: str,
    gpu_id: int | None,
    session_expiry: float = 1200.0,
) -> ToolkitInvocations:
    """A toolkit script's /invocations, after its start-up functions ran in this worker with `model_dir` (the default
    model_fn gives the model server's `model_name`, when there are model servers) and the worker's `gpu_id`
    (shared/gpus.py: its slot mod the GPUs CUDA sees; None without GPUs)."""
    served = (lambda: ServedModel(model_name, servers, client)) if servers else None
    log.info("%s: gpu_id %s (worker slot %d)", functions.script, gpu_id, gpus.worker_slot())
    loaded = start(functions, str(Path(model_dir).resolve()), model_name, gpu_id, served)
    try:
        return ToolkitInvocations(loaded, default_accept, session_expiry)
    except ImportError as exc:
        raise StartupFailure(
            f"{functions.script}: the default input_fn and output_fn need numpy, which is not "
            f"installed ({exc}): add numpy to code/requirements.txt, or define both"
        ) from None
