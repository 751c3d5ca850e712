"""What the app reads of every request from its WSGI environ, besides the body (bodies.py): its id, its path, and
the target model a multi-model request names (logged)."""

from __future__ import annotations

import itertools
import logging
import os
import random
import re

from ..shared.headers import REQUEST_ID_HEADER, TARGET_MODEL_HEADER, environ_key

_REQUEST_ID_KEY = environ_key(REQUEST_ID_HEADER)
_TARGET_MODEL_KEY = environ_key(TARGET_MODEL_HEADER)

# A client's X-Amzn-RequestId is kept when it is this (SageMaker's are UUIDs); another one is replaced by a new id:
# a long one would outgrow nginx's buffer for the answer's headers (a 503 after the handler ran), control
# characters would end up in logs.
_SANE_REQUEST_ID = re.compile(r"[\x20-\x7e]{1,256}")


def request_id(env: dict) -> str:
    """The client's X-Amzn-RequestId when it is sane (echoed and logged: printable ASCII, 256 at most), else a new
    one."""
    rid = env.get(_REQUEST_ID_KEY)
    if not rid or not _SANE_REQUEST_ID.fullmatch(rid):
        rid = new_request_id()
    return rid


def new_request_id() -> str:
    """An id in the layout of a random (version 4) UUID, unique in the process and, with overwhelming probability,
    beyond: 74 random bits drawn once per process, then a 48-bit counter that starts at a random value. A fifth of
    str(uuid.uuid4())'s cost, and no system call: an id, not a secret."""
    return f"{_ids.prefix}{next(_ids.counter) & 0xFFFF_FFFF_FFFF:012x}"


class _Ids:
    def __init__(self) -> None:
        self.draw()

    def draw(self) -> None:
        """New random bits (at start, and in each forked child: the workers must not share them)."""
        digits = f"{random.getrandbits(80):020x}"
        variant = "89ab"[int(digits[16], 16) & 3]  # RFC 4122's variant bits
        self.prefix = f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{variant}{digits[17:20]}-"
        self.counter = itertools.count(random.getrandbits(48))


_ids = _Ids()
os.register_at_fork(after_in_child=_ids.draw)


def request_path(env: dict) -> str:
    """The request's path, as routed and logged: PATH_INFO, "/" when empty, UTF-8 (PEP 3333 carries it as latin-1),
    as falcon.Request.path reads it."""
    path = env["PATH_INFO"] or "/"
    return path if path.isascii() else path.encode("latin-1").decode("utf-8", "replace")


def log_target_model(env: dict, rid: str) -> None:
    """SageMaker's TargetModel (e.g. `a/model-7.tar.gz`) with the request id, for the multi-model routes: which
    archive a request was for."""
    target = env.get(_TARGET_MODEL_KEY)
    if target is not None:
        logging.getLogger("sagemaker_tfs.multi_model").info(
            "request %s: %s %s, target model %s", rid, env["REQUEST_METHOD"], request_path(env), target
        )
