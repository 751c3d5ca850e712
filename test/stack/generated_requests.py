"""Seeded random requests to an endpoint serving half_plus_three (the default model) and half_plus_two (versions
123 and 124).

`Requests`: bodies and header lines of POST /invocations of every kind the direct route must tell apart (the
direct route's test, test_stack_direct_route.py). `Traffic`: whole HTTP requests built on them, for the stack under
random traffic (test_stack_random_traffic.py, scripts/fuzz_stack.py): other methods and paths, the runtime API's
InvokeEndpoint, bodies of every codec (JSON, JSON lines, CSV, NPY), malformed and repeated header lines, bogus
Content-Encoding, chunked, truncated and oversized bodies. Request `index` of seed `seed` is the same request
whatever was made before it, so that one request of a run can be made again alone."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import io
import json
import random
from collections.abc import Callable

import numpy
from direct_route_cases import ATTRIBUTE_FORMS, ATTRIBUTES, nested

TFS_KEYS = ("instances", "inputs", "examples", "signature_name")
ODD_STRINGS = ["{", "}", "{}", '"', "\\", '\\"}', "a}b{c", "\u00e9", "\u2028", "\U0001f600", "\x00", "\t\n"]
CONTENT_TYPES = ["application/json"] * 6 + [
    "application/json; charset=utf-8",
    "Application/JSON",
    "application/json ;charset=UTF-8",
    "application/json;",
    "text/csv",
    "application/jsonlines",
    "application/jsons",
    "text/plain",
    "application/json, text/csv",
    "application/x-npy",
    None,
]
ACCEPTS = [None] * 6 + [
    "*/*",
    "application/json",
    "application/json;q=0",
    "application/json;q=0.5",
    "text/csv",
    "application/jsonlines",
    "text/csv, application/json",
    "image/png",
    "*/*;q=0.1",
    "APPLICATION/JSON",
]
NAMES = ["half_plus_two", "half_plus_three", "missing", "a..b", "bad/name", "", "half_plus_two ", "HALF_PLUS_TWO"]
VERSIONS = ["123", "124", "7", "007", "abc", "", "-1", "99999999999999999999"]
METHODS = ["predict", "classify", "regress", "explain", "Predict"]


class Requests:
    """`Requests(seed).make()`: one request, (body bytes, header lines)."""

    def __init__(self, seed: int):
        self.random = random.Random(seed)

    def make(self) -> tuple[bytes, list[tuple[str, str]]]:
        pick = self.random.choice
        body = pick(
            [self._tfs_object] * 8
            + [self._flat, self._json_lines, self._broken, self._deep, self._decorated, self._other]
        )()
        plain = self.random.random() < 0.5  # headers the route takes: the SDK's, or a named model
        headers = []
        content_type = pick(CONTENT_TYPES[:8] if plain else CONTENT_TYPES)
        if content_type is not None:
            headers.append(("Content-Type", content_type))
        accept = pick(ACCEPTS[:8] if plain else ACCEPTS)
        if accept is not None:
            headers.append(("Accept", accept))
        if self.random.random() < 0.5:
            headers.append((ATTRIBUTES, self._attributes(plain)))
        if not plain and self.random.random() < 0.1:
            headers.append(("Content-Encoding", pick(["gzip", "identity", ""])))
            if headers[-1][1] == "gzip" and self.random.random() < 0.7:
                body = gzip.compress(body, mtime=0)  # mtime 0: the same bytes on every run
        if headers and not plain and self.random.random() < 0.3:  # a line repeated, with another value or the same
            name, value = pick(headers)
            other = {"Content-Type": CONTENT_TYPES, "Accept": ACCEPTS}.get(name)
            again = pick(other) if other and self.random.random() < 0.7 else value
            headers.insert(self.random.randrange(len(headers) + 1), (name, again if again is not None else value))
        self.random.shuffle(headers)
        return body, headers

    # ---- bodies
    def _value(self, depth: int) -> object:
        r = self.random
        kind = r.randrange(10 if depth < 6 else 5)
        if kind == 0:
            return r.choice([r.uniform(-1e3, 1e3), r.randint(-10, 10), 1e300, -0.0, 2**70])
        if kind == 1:
            return r.choice(ODD_STRINGS) + "".join(r.choice('ab{}[]\\",: ') for _ in range(r.randrange(6)))
        if kind == 2:
            return r.choice([True, False, None])
        if kind in (3, 4):
            return round(r.uniform(-10, 10), r.randrange(4))
        if kind in (5, 6, 7):
            return [self._value(depth + 1) for _ in range(r.randrange(4))]
        return {r.choice(["x", "b64", "a{", "instances", "y"]): self._value(depth + 1) for _ in range(r.randrange(3))}

    def _numbers(self) -> list:
        return [round(self.random.uniform(-100, 100), 3) for _ in range(self.random.randrange(1, 5))]

    def _tfs_object(self) -> bytes:
        r = self.random
        if r.random() < 0.5:  # one the models can answer
            request = r.choice(
                [
                    {"instances": self._numbers()},
                    {"inputs": self._numbers()},
                    {"inputs": {"x": self._numbers()}},
                    {"examples": [{"x": v} for v in self._numbers()]},
                    {"signature_name": "serving_default", "instances": self._numbers()},
                    {
                        "signature_name": r.choice(["regress_x_to_y", "classify_x_to_y", "nope"]),
                        "examples": [{"x": v} for v in self._numbers()],
                    },
                ]
            )
        else:
            request = {r.choice(TFS_KEYS): self._value(0)}
            for _ in range(r.randrange(3)):
                request[r.choice(["instances", "signature_name", "x", "inputs"])] = self._value(1)
        return json.dumps(request, ensure_ascii=r.random() < 0.5, indent=r.choice([None, None, 2])).encode()

    def _flat(self) -> bytes:
        r = self.random
        return json.dumps(
            r.choice(
                [self._numbers(), [[v] for v in self._numbers()], r.uniform(0, 9), [{"instances": self._numbers()}]]
            )
        ).encode()

    def _json_lines(self) -> bytes:
        lines = [
            self._tfs_object() if self.random.random() < 0.6 else self._flat() for _ in range(self.random.randint(2, 3))
        ]
        return b"\n".join(line.replace(b"\n", b"") for line in lines) + self.random.choice([b"", b"\n"])

    def _broken(self) -> bytes:
        body = self._tfs_object()
        cut = self.random.randrange(len(body))
        return self.random.choice(
            [
                body[:cut],
                body[:cut] + body[cut + 1 :],
                body[:cut] + b'"' + body[cut:],
                body[:cut] + b"\xff" + body[cut:],
            ]
        )

    def _deep(self) -> bytes:
        levels = self.random.choice([15, 16, 17, 20, 64, 1000, 20_000])
        if self.random.random() < 0.5:
            return nested(levels).encode()
        return ('{"instances": [' + "[" * levels + "1.0" + "]" * levels + "]}").encode()

    def _decorated(self) -> bytes:
        body = self._tfs_object()
        return self.random.choice(
            [
                b"\xef\xbb\xbf" + body,
                body + b" x",
                body + b"}",
                body + b" \r\n\t",
                b" \n" + body,
                body + b"," + body,
                body + b"\x00",
            ]
        )

    def _other(self) -> bytes:
        r = self.random
        return r.choice(
            [
                b"",
                b"  \n",
                b"1.0,2.0\n3.0,4.0",
                b'{"x": [1.0]}',
                b"null",
                b'"instances"',
                json.dumps({"y": 1, "instances": self._numbers()}).encode(),
            ]
        )

    # ---- custom attributes
    def _attributes(self, plain: bool) -> str:
        r = self.random
        if r.random() < 0.3:
            return r.choice(ATTRIBUTE_FORMS)[0]
        items = []
        if r.random() < 0.7:
            items.append("tfs-model-name=" + r.choice(NAMES[:3] if plain else NAMES))
        if r.random() < 0.4:
            items.append("tfs-model-version=" + r.choice(VERSIONS[:2] if plain else VERSIONS))
        if r.random() < 0.4:
            items.append("tfs-method=" + r.choice(METHODS[:3] if plain else METHODS))
        if r.random() < 0.3:
            items.append(r.choice(["trace=1", "x"] if plain else ["a=b c", "tfs-other=1", "TFS-METHOD=regress"]))
        if r.random() < 0.1 and items and not plain:
            items.append(r.choice(items))
        r.shuffle(items)
        return ",".join(items) if plain else r.choice([",", ", "]).join(items)


# ---- whole requests: Traffic

REQUEST_ID = "X-Amzn-RequestId"
TARGETS = ("routes", "pair", "toolkit")  # the no-script stacks (route on and off, compared), the two script stacks
RUNTIME_HEADERS = {
    "target model": "X-Amzn-SageMaker-Target-Model",
    "target variant": "X-Amzn-SageMaker-Target-Variant",
    "inference id": "X-Amzn-SageMaker-Inference-Id",
    "explanations": "X-Amzn-SageMaker-Enable-Explanations",
    "session": "X-Amzn-SageMaker-Session-Id",
}
ENDPOINT_NAMES = ["local-endpoint", "e", "my-endpoint-2", "bad_name", "-x", "a" * 63, "a" * 64, "a%20b", "A-b-C"]
OTHER_ROUTES = [
    ("GET", "/ping"),
    ("HEAD", "/ping"),
    ("POST", "/ping"),
    ("GET", "/execution-parameters"),
    ("POST", "/execution-parameters"),
    ("GET", "/invocations"),
    ("PUT", "/invocations"),
    ("DELETE", "/invocations"),
    ("PATCH", "/invocations"),
    ("OPTIONS", "/invocations"),
    ("HEAD", "/invocations"),
    ("TRACE", "/invocations"),
    ("FOO", "/invocations"),
    ("POST", "/invocations/"),
    ("POST", "//invocations"),
    ("POST", "/invocations?a=1&b"),
    ("POST", "/Invocations"),
    ("POST", "/models"),
    ("GET", "/models"),
    ("POST", "/v1/models/half_plus_three:predict"),
    ("GET", "/endpoints/local-endpoint/invocations"),
    ("POST", "/endpoints//invocations"),
    ("POST", "/endpoints/local-endpoint/invocations-response-stream"),
    ("POST", "/endpoints/local-endpoint/async-invocations"),
    ("GET", "/nope"),
    ("POST", "/%ff"),
    ("GET", "/" + "x" * 5000),
]
# Header lines nginx or the app must refuse or ignore: (raw line, True when nginx answers 400 for it)
MALFORMED_LINES = [
    b"NoColon",
    b"X_Under_Score: 1",
    b"Content-Type : text/csv",
    b" folded: continuation",
    b"X-Bad(Name): 1",
    b": empty-name",
    b"X-Empty:",
    b"X-Latin: caf\xe9",
    b"X-Nul: a\x00b",
    b"X-Long: " + b"v" * 9000,
    b"Expect: 100-continue",
    b"Expect: something-else",
    b"Host: other.example",
    b"Transfer-Encoding: gzip",
    b"Transfer-Encoding: identity",
    b"Content-Length: 5",
    b"Content-Length: -1",
    b"Content-Length: abc",
    b"Connection: close",
    b"Connection: keep-alive, Upgrade",
    b"Upgrade: websocket",
    b"Keep-Alive: timeout=5",
    b"Content-Encoding: gzip, gzip",
]
ENCODINGS = ["gzip", "gzip", "br", "deflate", "x-bogus", "identity", "GZIP", "gzip, identity", ""]
FEW_NUMBERS = [f"{value / 4:.2f}" for value in range(-40, 40)]  # the large bodies' numbers, cheap to pick
NPY_ACCEPTS: list[str | None] = ["application/x-npy", "text/csv;q=0.5, application/x-npy", "application/jsonlines;q=0"]


@dataclasses.dataclass
class Generated:
    """One HTTP request as it goes on the wire.

    mode: "length" (a Content-Length of the body), "chunked" (Transfer-Encoding: chunked, `chunks` the body's
    pieces; `bad_chunk` a malformed size line at the end), "none" (no Content-Length: the body must be empty),
    "truncated" (a Content-Length larger than the body, then the client closes), "oversized" (a Content-Length
    over the stacks' limit, `body` sent in full or, when `head_only`, not at all)."""

    seed: int
    index: int
    target: str
    method: str
    path: str
    version: str
    lines: list[bytes]  # header lines in order, raw (no CRLF), without the body's framing
    body: bytes
    mode: str = "length"
    declared: int = 0  # truncated and oversized: the Content-Length sent
    chunks: list[int] = dataclasses.field(default_factory=list)
    bad_chunk: bool = False
    head_only: bool = False
    request_id: str | None = None  # the X-Amzn-RequestId sent, when it is one the stack must echo

    @property
    def runtime_api(self) -> bool:
        return self.path.startswith("/endpoints/")

    @property
    def client_closes(self) -> bool:
        """The client ends the connection after sending (its answer may be cut off, or be none)."""
        return self.mode in ("truncated", "oversized")

    def wire(self) -> bytes:
        """The bytes sent: the head, then the body as the mode frames it."""
        framing: list[bytes] = []
        body = self.body
        if self.mode == "length":
            framing = [b"Content-Length: %d" % len(body)]
        elif self.mode in ("truncated", "oversized"):
            framing = [b"Content-Length: %d" % self.declared]
            body = b"" if self.head_only else body
        elif self.mode == "chunked":
            framing = [b"Transfer-Encoding: chunked"]
            pieces, start = [], 0
            for size in [*self.chunks, len(body) - sum(self.chunks)]:
                if size > 0:
                    pieces.append(b"%x\r\n%s\r\n" % (size, body[start : start + size]))
                    start += size
            body = b"".join(pieces) + (b"zz\r\n" if self.bad_chunk else b"0\r\n\r\n")
        head = b"%s %s %s\r\n" % (self.method.encode(), self.path.encode("latin-1"), self.version.encode())
        return head + b"".join(line + b"\r\n" for line in [*self.lines, *framing]) + b"\r\n" + body

    def describe(self, limit: int = 300) -> str:
        """The request for a report: how to make it again, and its first bytes."""
        shown = self.wire()
        cut = f" ... ({len(shown)} bytes)" if len(shown) > limit else ""
        return f"seed {self.seed} index {self.index} ({self.target}, {self.mode}): {shown[:limit]!r}{cut}"


class Traffic:
    """`Traffic(seed).make(index)`: request `index` of the run of `seed` (a Generated). `limit` is the stacks'
    client_max_body_size in bytes (oversized bodies are larger); `runtime_limit` the runtime API's payload limit."""

    def __init__(self, seed: int, limit: int = 2 << 20, runtime_limit: int = 1 << 20):
        self.seed, self.limit, self.runtime_limit = seed, limit, runtime_limit
        self.random = random.Random(seed)  # make() gives each request a stream of its own

    def make(self, index: int) -> Generated:
        maker = copy.copy(self)  # each request its own stream: threads may make requests at once
        maker.random = random.Random(f"{self.seed}/{index}")  # a str seed: the same stream on every run
        return maker._make(index)

    def _make(self, index: int) -> Generated:
        r = self.random
        requests = Requests(r.getrandbits(64))
        target = r.choices(TARGETS, weights=(2, 1, 1))[0]
        body, headers = self._body_and_headers(requests)
        method, path = "POST", "/invocations"
        roll = r.random()
        if roll < 0.12:
            method, path = "POST", "/endpoints/" + r.choice(ENDPOINT_NAMES[:3] * 4 + ENDPOINT_NAMES) + "/invocations"
            headers += self._runtime_headers()
        elif roll < 0.17:
            method, path = r.choice(OTHER_ROUTES)
            if method in ("GET", "HEAD", "OPTIONS", "TRACE") and r.random() < 0.8:
                body = b""
        lines = [f"{name}: {value}".encode("latin-1", "replace") for name, value in headers]
        request_id = None
        which = r.random()
        if which < 0.85:
            request_id = f"fuzz-{self.seed}-{index}"
            lines.append(f"{REQUEST_ID}: {request_id}".encode())
        elif which < 0.9:
            lines.append(f"{REQUEST_ID}: {'r' * 300}".encode())  # too long: replaced by a new id
        elif which < 0.95:
            lines.append(f"{REQUEST_ID}: a b\tc".encode())  # not printable ASCII without blanks
        if r.random() < 0.97:  # HTTP/1.1 without Host: nginx's 400
            lines.insert(r.randrange(len(lines) + 1), b"Host: localhost")
        if r.random() < 0.08:
            for _ in range(r.choice([1, 1, 1, 2])):
                lines.insert(r.randrange(len(lines) + 1), r.choice(MALFORMED_LINES))
        version = "HTTP/1.1" if r.random() < 0.97 else r.choice(["HTTP/1.0", "HTTP/2.0", "HTTP/1.2", "HTTP/0.9"])
        generated = Generated(self.seed, index, target, method, path, version, lines, body, request_id=request_id)
        self._framing(generated)
        return generated

    def _framing(self, generated: Generated) -> None:
        r = self.random
        roll = r.random()
        if roll < 0.05 and generated.body:
            generated.mode = "chunked"
            cuts = sorted(r.randrange(len(generated.body)) for _ in range(r.randrange(4)))
            generated.chunks = [b - a for a, b in zip([0, *cuts], cuts, strict=False)]
            generated.bad_chunk = r.random() < 0.1
        elif roll < 0.08:
            generated.mode = "truncated"
            generated.declared = len(generated.body) + r.choice([1, 10, 1000, 1 << 20])
        elif roll < 0.09:
            generated.mode = "oversized"
            generated.declared = self.limit + r.choice([1, 1000, self.limit])
            generated.head_only = r.random() < 0.5
            if not generated.head_only:
                generated.body = (generated.body or b"1.0") * (generated.declared // max(len(generated.body), 3) + 1)
                generated.body = generated.body[: generated.declared]
        elif roll < 0.1 and not generated.body:
            generated.mode = "none"

    # ---- bodies of each codec, with their headers
    def _body_and_headers(self, requests: Requests) -> tuple[bytes, list[tuple[str, str]]]:
        r = self.random
        kind = r.choices(["tfs", "csv", "jsonlines", "npy", "big"], weights=(60, 14, 10, 15, 1))[0]
        if kind == "tfs":
            return requests.make()
        if kind == "big":  # a body nginx keeps in memory (up to 1 MB), and one it keeps in a file
            count = r.choice([10, 1000, 50_000, 250_000])
            block = ", ".join(r.choices(FEW_NUMBERS, k=min(count, 1000)))
            body = ('{"instances": [' + ", ".join([block] * (count // 1000 or 1)) + "]}").encode()
            if count > 1000 and r.random() < 0.5:
                body = body[: len(body) // 2]  # a cut one: the app's 400
            return body, [("Content-Type", "application/json")]
        body, content_type = {"csv": self._csv, "jsonlines": self._json_lines, "npy": self._npy}[kind](requests)
        headers: list[tuple[str, str]] = []
        if r.random() < 0.9:  # (another type: None is sent as the text "None", a bogus type)
            headers.append(("Content-Type", content_type if r.random() < 0.85 else str(r.choice(CONTENT_TYPES[6:]))))
        accept = r.choice(ACCEPTS + NPY_ACCEPTS)
        if accept is not None:
            headers.append(("Accept", accept))
        if r.random() < 0.3:
            headers.append((ATTRIBUTES, requests._attributes(r.random() < 0.5)))
        if r.random() < 0.08:
            encoding = r.choice(ENCODINGS)
            headers.append(("Content-Encoding", encoding))
            if encoding.lower().startswith("gzip") and r.random() < 0.7:
                body = gzip.compress(body, mtime=0)  # mtime 0: the same bytes on every run
        if headers and r.random() < 0.1:
            headers.insert(r.randrange(len(headers) + 1), r.choice(headers))
        r.shuffle(headers)
        return body, headers

    def _number(self) -> str:
        r = self.random
        return r.choice(
            [f"{r.uniform(-100, 100):.3f}", str(r.randint(-9, 9)), "nan", "inf", "1e400", "x", "", '"1.5"', " 2 "]
        )

    def _csv(self, requests: Requests) -> tuple[bytes, str]:
        r = self.random
        columns = r.choice([1, 1, 1, 2, 3])
        rows = [
            ",".join(self._number() if r.random() < 0.15 else f"{r.uniform(-9, 9):.2f}" for _ in range(columns))
            for _ in range(r.randint(1, 6))
        ]
        if r.random() < 0.1:
            rows.insert(r.randrange(len(rows) + 1), r.choice(["", "1,2,3,4", "a;b", '"unclosed']))
        body = r.choice(["\n", "\r\n"]).join(rows) + r.choice(["", "\n"])
        encoded = body.encode()
        if r.random() < 0.05:
            encoded = r.choice([b"\xef\xbb\xbf", b"\xff\xfe", b""]) + encoded + r.choice([b"", b"\xe9", b"\x00"])
        return encoded, r.choice(["text/csv"] * 5 + ["text/csv; charset=utf-8", "TEXT/CSV", "text/csv; header=present"])

    def _json_lines(self, requests: Requests) -> tuple[bytes, str]:
        r = self.random
        if r.random() < 0.5:
            body = requests._json_lines()
        else:
            rows = [json.dumps(requests._numbers() if r.random() < 0.8 else requests._value(3)) for _ in range(3)]
            body = "\n".join(rows[: r.randint(1, 3)]).encode()
        return body, r.choice(["application/jsonlines", "application/jsons", "application/x-jsonlines"])

    def _npy(self, requests: Requests) -> tuple[bytes, str]:
        r = self.random
        values = requests._numbers()
        makers: list[Callable[[], numpy.ndarray]] = [
            lambda: numpy.array(values, dtype=numpy.float32),
            lambda: numpy.array([[v] for v in values], dtype=numpy.float32),
            lambda: numpy.array(values, dtype=numpy.float64),
            lambda: numpy.array(values, dtype=">f4"),
            lambda: numpy.array([int(v) for v in values], dtype=numpy.int32),
            lambda: numpy.array(values[0], dtype=numpy.float32),
            lambda: numpy.zeros((0,), dtype=numpy.float32),
            lambda: numpy.asfortranarray(numpy.ones((2, 3), dtype=numpy.float32)),
            lambda: numpy.array([True, False]),
            lambda: numpy.array(["a", "bc"]),
            lambda: numpy.array([{"a": 1}, None], dtype=object),
        ]
        array = r.choice(makers)()
        buffer = io.BytesIO()
        numpy.save(buffer, array, allow_pickle=array.dtype == object)
        body = buffer.getvalue()
        damage = r.random()
        if damage < 0.1:
            body = body[: r.randrange(len(body))]
        elif damage < 0.15:
            body = b"\x93NUMPZ" + body[6:]
        elif damage < 0.2:
            body = body.replace(b"'descr'", b"'dexcr'")
        return body, r.choice(["application/x-npy"] * 6 + ["application/x-npy; charset=binary", "application/npy"])

    def _runtime_headers(self) -> list[tuple[str, str]]:
        r = self.random
        headers = []
        for what, name in RUNTIME_HEADERS.items():
            if r.random() < 0.08:
                value = {
                    "target model": r.choice(["half_plus_two", "m.tar.gz", " x", ""]),
                    "target variant": r.choice(["AllTraffic", "Blue", "bad_variant", ""]),
                    "inference id": r.choice(["inference-7", "x" * 65, ""]),
                    "explanations": r.choice(["`true`", "false"]),
                    "session": r.choice(["NEW_SESSION", "s-1"]),
                }[what]
                headers.append((name, value))
        if r.random() < 0.05:
            headers.append((ATTRIBUTES, "k=" + "v" * 1100))  # over the service model's 1024
        return headers
