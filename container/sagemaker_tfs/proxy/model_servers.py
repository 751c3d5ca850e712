"""The model server instances, and the client that calls them and says in the app's terms what went wrong
(the HTTP plumbing is http_client.py)."""

from __future__ import annotations

from typing import Any

import requests

from ..errors import HandlerError
from .http_client import HOST, HttpClient, ProtocolError


class ModelServerError(HandlerError):
    """The model server could not be reached (502) or did not answer in time (504)."""


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

            channel = self._channel = grpc.insecure_channel(f"{HOST}:{self.grpc_port}")
        return channel

    def __repr__(self) -> str:
        return f"ModelServer(rest={self.rest_port}, grpc={self.grpc_port})"




class ModelServerClient:
    """HTTP/1.1 to the model servers (keep-alive connections per thread); failures as ModelServerError."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self._http = HttpClient()

    def request(self, server: ModelServer, method: str, path: str, data: Any = None,
                timeout: float | None = None) -> requests.Response:
        """The model server's answer, whatever its status; ModelServerError 502/504 when there is none."""
        timeout = self.timeout if timeout is None else timeout
        try:
            return self._http.request(server.rest_port, method, path, data, timeout)
        except TimeoutError:
            raise ModelServerError(504, f"the model server at {server.address} did not answer within "
                                        f"{timeout:g} s") from None
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            raise ModelServerError(502, f"the model server at {server.address} is not reachable ({reason}); it "
                                        "may be starting or restarting") from None
        except ProtocolError as exc:
            raise ModelServerError(502, f"the model server at {server.address} sent an invalid answer: "
                                        f"{exc}") from None

    def close(self) -> None:
        """Close this thread's connections."""
        self._http.close()
