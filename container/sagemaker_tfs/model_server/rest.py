"""The HTTP/REST API of TFS (`/v1/models/...`): a request's method, path and body to a response.

Routes, status codes and bodies follow TFS (docs/tfs-compatibility.md §1-4): paths are matched
case-insensitively by TFS's regular expressions, methods and verbs case-sensitively; anything else under
`/v1/` is `400 Malformed request`, and paths outside it get a 404 HTML page like libevent's.
The HTTP/1.1 protocol it is served with (parsing, keep-alive, writing) is http_server.py.
"""

from __future__ import annotations

import asyncio
import logging
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import cast

from google.protobuf import json_format
from google.protobuf.message import Message
from tensorflow_serving.apis import model_pb2

from ..shared import tfs_api, tfs_json_response
from ..shared.error_codes import Code, ServingError, invalid_argument
from ..shared.version_folders import INT64_MAX
from . import json_request, signatures
from .http_server import Pending, Response, html_error
from .runner import Outputs, Runner
from .servable_manager import ServableManager

log = logging.getLogger(__name__)

_V1 = re.compile(r"/v1/.*", re.I | re.S)
# re.A: a version is ASCII digits (Python's \d would also take other scripts' digits, which TFS's RE2 does not).
_POST = re.compile(
    rf"{tfs_api.MODELS}/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?:({tfs_api.METHOD_PATTERN})", re.I | re.A
)
_GET = re.compile(
    rf"{tfs_api.MODELS}(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:/(metadata))?", re.I | re.A
)
_ORIGIN = re.compile(r"https?://.+", re.I)


class Verb(Enum):
    """What a /v1/ route does."""

    PREDICT = tfs_api.PREDICT
    CLASSIFY = tfs_api.CLASSIFY
    REGRESS = tfs_api.REGRESS
    STATUS = "status"
    METADATA = "metadata"


@dataclass(frozen=True, slots=True)
class Route:
    """A request's meaning: a verb on a model (optionally one version or label), or a fixed answer."""

    verb: Verb | None  # None: `fixed` is the answer (errors that depend on the path alone)
    name: str = ""
    version: int | None = None
    label: str | None = None
    fixed: Response | None = None


def _error(error: ServingError) -> Response:
    return Response(error.http_status, tfs_json_response.error_body(error.message), code=error.code.name)


def _fixed(response: Response) -> Route:
    return Route(None, fixed=response)


class _Outputs(Pending):
    """A response waiting for a signature's outputs, and how to make the body of them."""

    __slots__ = ("finish",)

    def __init__(self, future: asyncio.Future[Outputs], finish: Callable[[Outputs], bytes]):
        self.future, self.finish = future, finish

    def response(self) -> Response:
        try:
            return Response(200, self.finish(self.future.result()))
        except ServingError as exc:
            return _error(exc)
        except asyncio.CancelledError:  # the server is stopping
            return _error(ServingError(Code.CANCELLED, "request cancelled"))
        except Exception as exc:  # a bug must still answer the client
            log.exception("request failed")
            return _error(ServingError(Code.INTERNAL, f"{type(exc).__name__}: {exc}"))


def _then(future: asyncio.Future[Outputs], finish: Callable[[Outputs], bytes]) -> Response | Pending:
    """The response made of the outputs by finish(): now if they are ready (an inline run), else a Pending."""
    pending = _Outputs(future, finish)
    return pending.response() if future.done() else pending


Handler = Callable[[Route, bytes], "Response | Pending"]


class RestApi:
    """Maps a request (method, raw path, body) to a Response, or a Pending one: the Application that
    http_server.HttpProtocol serves."""

    def __init__(self, servables: ServableManager, runner: Runner, cors: bool = False):
        self.servables = servables
        self.runner = runner
        self.extra_headers = (
            (
                b"Access-Control-Allow-Origin: *\r\nAccess-Control-Allow-Methods: POST, GET\r\n"
                b"Access-Control-Allow-Headers: Content-Type\r\n"
            )
            if cors
            else b""
        )
        self._handlers: dict[Verb | None, Handler] = {
            Verb.PREDICT: self._predict,
            Verb.CLASSIFY: self._classify_regress,
            Verb.REGRESS: self._classify_regress,
            Verb.STATUS: self._status,
            Verb.METADATA: self._metadata,
            None: self._fixed_response,
        }
        self._routes: dict[tuple[str, str], tuple[Handler, Route]] = {}  # the handler found once per path

    def handle(self, method: str, path: str, body: bytes) -> Response | Pending:
        try:
            entry = self._routes.get((method, path))
            if entry is None:
                route = self.route(method, path)
                entry = self._handlers[route.verb], route
                if len(self._routes) > 4096:
                    self._routes.clear()
                self._routes[(method, path)] = entry
            handler, route = entry
            return handler(route, body)
        except ServingError as exc:
            return _error(exc)
        except Exception as exc:  # a bug must still answer the client with JSON
            log.exception("%s %s failed", method, path)
            return _error(ServingError(Code.INTERNAL, f"{type(exc).__name__}: {exc}"))

    def route_of(self, method: str, path: str) -> Route | None:
        """The route a handled request was found to have (None if its path did not parse)."""
        entry = self._routes.get((method, path))
        return entry[1] if entry is not None else None

    def preflight(self, path: str, origin: bytes | None) -> Response:
        if not _V1.fullmatch(path):
            return html_error(404)
        return Response(200 if _ORIGIN.fullmatch((origin or b"").decode("latin-1")) else 400, b"")

    def bad_request(self, message: str) -> Response:
        return _error(invalid_argument(message))

    @staticmethod
    def refuse(status: int, message: str) -> Response:
        return Response(status, tfs_json_response.error_body(message), code="RESOURCE_EXHAUSTED")

    @classmethod
    def route(cls, method: str, path: str) -> Route:
        if not _V1.fullmatch(path):
            return _fixed(html_error(404))
        if method in ("TRACE", "CONNECT"):
            return _fixed(html_error(501))
        malformed = _fixed(_error(invalid_argument(f"Malformed request: {method} {path}")))
        if method == "POST":
            match = _POST.fullmatch(path)
            if not match or match.group(4) not in ("classify", "regress", "predict"):
                return malformed
            return cls._target(Verb(match.group(4)), match)
        if method == "GET":
            match = _GET.fullmatch(path)
            if not match:
                return malformed
            if match.group(1) is None:
                return _fixed(_error(invalid_argument("Missing model name in request.")))
            return cls._target(Verb.METADATA if match.group(4) == "metadata" else Verb.STATUS, match)
        return malformed

    @staticmethod
    def _target(verb: Verb, match: re.Match) -> Route:
        version = match.group(2)
        if version is not None:
            # past 19 significant digits it cannot be an int64 (and int() refuses 4,300+ digits)
            digits = version.lstrip("0")
            version = int(digits or "0") if len(digits) <= 19 else INT64_MAX + 1
            if version > INT64_MAX:
                raise invalid_argument(f"Failed to convert version: {match.group(2)} to numeric.")
        label = match.group(3)
        return Route(
            verb,
            urllib.parse.unquote(match.group(1), errors="replace"),
            version,
            None if label is None else urllib.parse.unquote(label, errors="replace"),
        )

    # ---------------------------------------------------------------------------------------- handlers

    @staticmethod
    def _fixed_response(route: Route, _body: bytes) -> Response:
        return cast(Response, route.fixed)  # set on every route this handler serves

    def _predict(self, route: Route, body: bytes) -> Response | Pending:
        doc = json_request.predict_request(body, lambda name: self._input_dtype(route, name))
        signature_name = json_request.signature_name(doc)
        servable = self.servables.resolve(route.name, route.version, route.label)
        signature = signatures.predict_signature(servable, signature_name, rest=True)
        tensors, row_format = json_request.predict_inputs(doc, signature.inputs, json_request.may_hold_bools(doc, body))
        feeds = {signature.inputs[alias].name: array for alias, array in tensors.items()}
        outputs = self.runner.run_in_loop(servable, feeds, signature.fetches, "Predict")
        aliases = signature.output_aliases
        return _then(
            outputs, lambda result: tfs_json_response.predict_body(dict(zip(aliases, result, strict=True)), row_format)
        )

    def _input_dtype(self, route: Route, signature_name: str) -> int | None:
        """The dtype of the signature's one input (None: not one, or an error, which _predict then answers in
        its order): what lets predict_request convert a big numeric body as it checks it."""
        try:
            servable = self.servables.resolve(route.name, route.version, route.label)
            inputs = signatures.predict_signature(servable, signature_name, rest=True).inputs
        except ServingError:
            return None
        return next(iter(inputs.values())).dtype if len(inputs) == 1 else None

    def _classify_regress(self, route: Route, body: bytes) -> Response | Pending:
        classify = route.verb is Verb.CLASSIFY
        doc = json_request.request_object(body)
        signature_name = json_request.signature_name(doc)
        servable = self.servables.resolve(route.name, route.version, route.label)
        run = (signatures.classify_run if classify else signatures.regress_run)(servable, signature_name)
        examples = json_request.serialized_examples(doc)
        count = len(examples)
        outputs = self.runner.run_in_loop(
            servable,
            {run.input_name: signatures.examples_tensor(examples)},
            run.fetches,
            "Classify" if classify else "Regress",
        )
        if classify:
            return _then(
                outputs,
                lambda result: tfs_json_response.classify_body(*signatures.classification(result, run, count), count),
            )
        return _then(outputs, lambda result: tfs_json_response.regress_body(signatures.regression(result, count)))

    def _status(self, route: Route, _body: bytes) -> Response:
        response = self.servables.status_proto(route.name, route.version)  # TFS ignores a status request's label
        return Response(200, _proto_json(response).encode("utf-8"))

    def _metadata(self, route: Route, _body: bytes) -> Response:
        servable = self.servables.resolve(route.name, route.version, route.label)
        spec = model_pb2.ModelSpec(name=servable.name, signature_name="")
        spec.version.value = servable.version
        signature_map = servable.signature_def_map()
        # TFS concatenates two protobuf JSON texts by hand; the layout below is its, byte for byte.
        body = (
            '{\n"model_spec":'
            + _proto_json(spec)
            + ',\n"metadata": {"signature_def": '
            + _proto_json(signature_map)
            + "}\n}\n"
        )
        return Response(200, body.encode("utf-8"))


def _proto_json(message: Message) -> str:
    """protobuf's JSON printer as TFS configures it: 1-space indent, defaults printed, trailing newline."""
    return (
        json_format.MessageToJson(
            message, indent=1, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
        + "\n"
    )
