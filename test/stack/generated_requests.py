"""Seeded random requests to POST /invocations of a no-script endpoint (half_plus_three the default model,
half_plus_two with versions 123 and 124): bodies and header lines of every kind the direct route must tell apart."""

from __future__ import annotations

import gzip
import json
import random

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
                body = gzip.compress(body)
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
