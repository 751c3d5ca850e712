"""The model server instances, and the client that calls them and says in the app's terms what went wrong
(the HTTP plumbing is http_client.py)."""

from __future__ import annotations

import functools
import itertools
import json as json_module
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests

from ..config import PING_TIMEOUT_SECONDS, Settings
from ..errors import HandlerError
from ..shared.media_types import JSON
from ..shared.sockets import HOST
from ..shared.tfs_api import status_path
from ..shared.version_states import VersionState
from .http_client import HttpClient, ProtocolError

UNLIMITED_MESSAGES = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


class ModelServer:
    """One model server instance on 127.0.0.1. Its gRPC channel is made on first use, in the worker
    process that uses it (a channel must not cross a fork)."""

    def __init__(self, rest_port: int, grpc_port: int):
        self.rest_port = rest_port
        self.grpc_port = str(grpc_port)  # a string, as in the original Context
        self.address = f"{HOST}:{rest_port}"
        self.base_uri = f"http://{HOST}:{rest_port}"
        self._channel = None

    @property
    def channel(self) -> Any:
        channel = self._channel
        if channel is None:  # two threads may both get here: one channel is then dropped, which is harmless
            import grpc  # only scripts get a channel: the default handler does not pay for grpc

            # no 4 MB cap on answers (gRPC's default): the model servers take and give messages of any size
            channel = self._channel = grpc.insecure_channel(f"{HOST}:{self.grpc_port}", options=UNLIMITED_MESSAGES)
        return channel

    def __repr__(self) -> str:
        return f"ModelServer(rest={self.rest_port}, grpc={self.grpc_port})"


def round_robin(servers: list[ModelServer]) -> Callable[[], ModelServer]:
    """The next instance to call, each in turn (itertools.cycle, whose next() is atomic: no lock), each worker
    process starting at a different one."""
    start = os.getpid() % len(servers)
    return itertools.cycle(servers[start:] + servers[:start]).__next__


def model_servers(settings: Settings) -> list[ModelServer]:
    """The model server instances `serve` started (TFS_REST_PORTS and TFS_GRPC_PORTS, same order and length as
    Settings checks; none without them)."""
    rest_ports, grpc_ports = settings.model_server_rest_ports or (), settings.model_server_grpc_ports or ()
    return [ModelServer(rest, grpc) for rest, grpc in zip(rest_ports, grpc_ports, strict=True)]


class ModelServerError(HandlerError):
    """The model server could not be reached (502) or did not answer in time (504)."""


class ModelServerUnreachable(ModelServerError, requests.ConnectionError):
    """502, and for scripts that catch requests' errors, a requests.ConnectionError."""


class ModelServerTimeout(ModelServerError, requests.Timeout):
    """504, and for scripts that catch requests' errors, a requests.Timeout."""


def no_answer(address: str, timeout: float) -> ModelServerTimeout:
    return ModelServerTimeout(504, f"the model server at {address} did not answer within {timeout:g} s")


def unreachable(address: str, reason: str) -> ModelServerUnreachable:
    return ModelServerUnreachable(
        502, f"the model server at {address} is not reachable ({reason}); it may be starting or restarting"
    )


CONNECTIONS = HttpClient()  # the keep-alive connections of each thread of this process, for every caller


def call(
    port: int, method: str, path: str, data: Any = None, timeout: float = 30.0, headers: dict[str, str] | None = None
) -> requests.Response:
    """The answer of the model server on this loopback port, whatever its status; ModelServerError 502/504 (also
    a requests.ConnectionError or requests.Timeout) when there is none."""
    address = f"{HOST}:{port}"
    try:
        return CONNECTIONS.request(port, method, path, data, timeout, headers)
    except TimeoutError:
        raise no_answer(address, timeout) from None
    except OSError as exc:
        raise unreachable(address, exc.strerror or str(exc) or type(exc).__name__) from None
    except ProtocolError as exc:
        raise ModelServerUnreachable(502, f"the model server at {address} sent an invalid answer: {exc}") from None


class ModelServerClient:
    """HTTP/1.1 to the model servers (keep-alive connections per thread); failures as ModelServerError."""

    def __init__(self, timeout: float):
        self.timeout = timeout

    def request(
        self, server: ModelServer, method: str, path: str, data: Any = None, timeout: float | None = None
    ) -> requests.Response:
        """The model server's answer, whatever its status; ModelServerError 502/504 when there is none."""
        return call(server.rest_port, method, path, data, self.timeout if timeout is None else timeout)

    def close(self) -> None:
        """Close this thread's connections."""
        CONNECTIONS.close()


def answer_json(response: requests.Response) -> Any:
    """The JSON of a model server's 200 answer; HandlerError with its status (502 below 400) and its `error`
    otherwise, 502 for a 200 that is not JSON."""
    try:
        answer = json_module.loads(response.content)
    except ValueError:
        answer = None
    if response.status_code != 200:
        message = answer.get("error") if isinstance(answer, dict) else None
        raise HandlerError(
            response.status_code if response.status_code >= 400 else 502,
            message or f"the model server answered {response.status_code}: {response.content[:200]!r}",
        )
    if answer is None:
        raise HandlerError(502, f"the model server's answer is not JSON: {response.content[:200]!r}")
    return answer


class ModelServerSession:
    """`context.session`: requests' post/get/request for a handler script's calls to the model server (the
    Context's rest_uri), over this thread's keep-alive connections rather than requests' own. Answers are
    requests.Response objects; errors are requests' ConnectionError and Timeout, which uncaught answer 502 and
    504. Only the loopback interface is reached: use requests for anything else."""

    def __init__(self, timeout: float):
        self.timeout = timeout  # the default: SAGEMAKER_GUNICORN_TIMEOUT_SECONDS, as context.timeout

    def request(
        self,
        method: str,
        url: str,
        data: Any = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> requests.Response:
        port, path = loopback_target(url)
        if json is not None:
            data = json_module.dumps(json).encode()
            headers = {"Content-Type": JSON, **(headers or {})}
        return call(port, method.upper(), path, data, self.timeout if timeout is None else timeout, headers)

    def post(self, url: str, data: Any = None, json: Any = None, **options: Any) -> requests.Response:
        return self.request("POST", url, data, json, **options)

    def get(self, url: str, **options: Any) -> requests.Response:
        return self.request("GET", url, **options)


@functools.lru_cache(maxsize=256)  # a script calls the same few rest_uri values
def loopback_target(url: str) -> tuple[int, str]:
    """(port, path with query) of an http://127.0.0.1:<port>/... URL; ValueError for any other."""
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in (HOST, "localhost") or parts.port is None:
        raise ValueError(
            f"context.session reaches the model servers (http://{HOST}:<port>/...), not {url!r}: "
            "use requests for other addresses"
        )
    return parts.port, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


# ---- the status API: GET /v1/models/<name>, asked by serve's start-up, /ping and the multi-model registry ----


@dataclass(frozen=True)
class VersionStatus:
    version: int
    state: str  # a VersionState's name as the model server wrote it
    error: str  # the version's error message, "" when it has none

    @property
    def available(self) -> bool:
        """Whether the version serves requests (AVAILABLE): the one rule of every reader of the status API."""
        return self.state == VersionState.AVAILABLE


@dataclass(frozen=True)
class ModelStatus:
    """What one model server instance says of one model."""

    http_status: int  # 200, or 404 when it does not know the model
    versions: tuple[VersionStatus, ...]
    # model_version_status as the model server wrote it (the registry's describe passes it on)
    entries: list[dict[str, Any]]
    error: str | None  # the answer's "error" when it is not a 200

    @property
    def available(self) -> bool:
        """Whether a version is AVAILABLE (a request without a version is served)."""
        return any(v.available for v in self.versions)

    @property
    def all_available(self) -> bool:
        """Whether the model has versions and every one is AVAILABLE."""
        return self.serves(v.version for v in self.versions)

    def serves(self, versions: Iterable[int]) -> bool:
        """Whether these versions (one at least) are each listed and AVAILABLE."""
        wanted = list(versions)
        return bool(wanted) and all((found := self.version(v)) is not None and found.available for v in wanted)

    def version(self, number: int) -> VersionStatus | None:
        """The status of that version, None when the model server does not list it."""
        return next((v for v in self.versions if v.version == number), None)


def model_status(port: int, model: str, timeout: float = PING_TIMEOUT_SECONDS) -> ModelStatus:
    """The model's status on the model server at this loopback port; ModelServerError 502/504 when it does not
    answer."""
    answer = call(port, "GET", status_path(model), timeout=timeout)
    try:
        body = answer.json()
    except ValueError:
        body = None
    body = body if isinstance(body, dict) else {}
    entries = (
        [e for e in body.get("model_version_status", []) if isinstance(e, dict)] if answer.status_code == 200 else []
    )
    versions = []
    for entry in entries:
        try:
            version = int(entry["version"])
        except (KeyError, TypeError, ValueError):
            continue
        status = entry.get("status")
        versions.append(
            VersionStatus(
                version,
                str(entry.get("state", "")),
                str(status.get("error_message", "")) if isinstance(status, dict) else "",
            )
        )
    error = body.get("error") if answer.status_code != 200 else None
    return ModelStatus(answer.status_code, tuple(versions), entries, None if error is None else str(error))


# A name asked about only to see that a model server answers (200 or 404, whatever it serves).
ANY_MODEL = "sagemaker-tfs-ping"


def answers(port: int) -> bool:
    """Whether the model server at this loopback port answers its status API."""
    try:
        return model_status(port, ANY_MODEL).http_status in (200, 404)
    except ModelServerError:
        return False
