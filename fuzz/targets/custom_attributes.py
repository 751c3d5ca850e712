"""The custom attributes header (app/context.tfs_attributes): a HandlerError 400 or a valid target; and where the
direct route takes the header (stack/direct_route.py: its header rule and target maps, PCRE that nginx runs,
evaluated here with Python's `re`), the app takes it too and calls the same model server path.

An input is the header (latin-1), or, after a first byte 0x01, tokens (a byte each) that spell one: the regexes run
in C, out of the fuzzer's sight, so the tokens make headers the route's rule takes common."""

import re

from sagemaker_tfs.app.context import tfs_attributes
from sagemaker_tfs.errors import HandlerError
from sagemaker_tfs.shared.headers import ATTRIBUTE_KEYS, CUSTOM_ATTRIBUTES_HEADER
from sagemaker_tfs.shared.tfs_api import METHODS, model_path
from sagemaker_tfs.stack import direct_route

MODULES = ("sagemaker_tfs.app.context",)
DEFAULT_MODEL = "half_plus_three"


def _nginx_regex(key: str) -> re.Pattern[str]:
    """A map key's regex (after `~`, or `~*`: any case) in Python's syntax: named groups are written (?P<...>)."""
    caseless = key.startswith("~*")
    return re.compile(key.removeprefix("~*" if caseless else "~").replace("(?<", "(?P<"), re.I if caseless else 0)


def _unquoted(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])  # nginx's parser: \\ and \" in a double-quoted string


RULE = next(rule for rule in direct_route.HEADER_RULES if rule.header == CUSTOM_ATTRIBUTES_HEADER)
TAKEN = [key for key in RULE.takes if not key.startswith("~")]
TAKEN_REGEXES = [_nginx_regex(key) for key in RULE.takes if key.startswith("~")]
# each target map of direct_route.target_maps: (variable, default, regex key, value with $<group>)
_MAP = re.compile(r'map \S+ (\$\w+) \{\n\s+default ("(?:[^"\\]|\\.)*");\n\s+("(?:[^"\\]|\\.)*") ("(?:[^"\\]|\\.)*");')
TARGETS = [
    (variable, _unquoted(default), _nginx_regex(_unquoted(key)), _unquoted(value))
    for variable, default, key, value in _MAP.findall(direct_route.target_maps(DEFAULT_MODEL))
]
assert len(TARGETS) == 3, direct_route.target_maps(DEFAULT_MODEL)


def _filled(value: str, found: re.Match[str]) -> str:
    """A map's value with its $<group> variables replaced by what the regex captured."""
    return re.sub(r"\$(\w+)", lambda group: found[group[1]] or "", value)


def route_path(header: str) -> str | None:
    """The model server path the direct route calls for this header, or None where the route leaves it to the app."""
    if header not in TAKEN and not any(regex.search(header) for regex in TAKEN_REGEXES):
        return None
    path = direct_route.MODEL_SERVER_PATH
    for variable, default, regex, value in TARGETS:
        found = regex.search(header)
        path = path.replace(variable, _filled(value, found) if found else default)
    return path


TOKENS = (
    *(f"{key}=" for key in ATTRIBUTE_KEYS), *METHODS, ",", "=", "0", "1", "9", "007", "9" * 18, "a", "Z", ".", "..",
    "-", "_", "/", "%2F", " ", "tfs-", "TFS-", "Tfs-", "x=1", "trace", "\t", "\xe9", ";", "m" * 250, "",
)  # fmt: skip


def header_of(data: bytes) -> str:
    if data[:1] == b"\x01":
        return "".join(TOKENS[byte % len(TOKENS)] for byte in data[1:])
    return data.decode("latin-1")


def seeds() -> list[bytes]:
    # test/direct_route_cases.py's ATTRIBUTE_FORMS and the unit tests' headers
    return [
        b"tfs-model-name=half_plus_three,tfs-model-version=1",
        b"tfs-method=classify",
        b"x=1,tfs-model-name=a",
        b"trace=abc",
        b"a=1,b=2",
        b"tfs-method=regress,tfs-model-name=half_plus_two",
        b"trace=1,tfs-model-name=m.v-2_x,other=ok",
        b"tfs-model-version=007",
        b"tfs-model-version=123456789012345678",
        b"tfs-model-version=1234567890123456789",
        b"tfs-model-name=a..b",
        b"tfs-model-name=a,tfs-model-name=b",
        b"tfs-model-version=-1",
        b"tfs-method=Predict",
        b"TFS-MODEL-NAME=half_plus_three",
        bytes([1, 0, 13, 15, 14, 6, 1, 9, 6, 2, 4]),  # tfs-model-name=a.Z,tfs-model-version=1,tfs-method=classify
    ]


def one_input(data: bytes) -> None:
    header = header_of(data)
    try:
        name, version, method = tfs_attributes(header)
    except HandlerError as exc:
        assert exc.status == 400, exc.status
        app = None
    else:
        app = model_path(name or DEFAULT_MODEL, version, method)
    if not set("\0\r\n") & set(header):  # a header line never holds them: nginx never sees them
        route = route_path(header)
        assert route is None or route == app, (header, route, app)
