"""The direct route's rules, as nginx config: which POST /invocations nginx sends straight to the model servers.

When no handler script applies, a request that needs nothing the default handler does goes from nginx to
`/v1/models/<name>[/versions/<version>]:<method>` on the model servers, body unchanged; any other request, and any
error answer of the model servers that the app could give otherwise, goes to the app, which answers it as it always
would. When in doubt, the app:
the rules below only ever pick a route, they never shape an answer. docs/ARCHITECTURE.md (The direct route) draws
the locations and their hand-overs; stack/nginx.py puts these pieces into nginx.conf.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ..shared.headers import (
    ATTRIBUTE_KEYS,
    CUSTOM_ATTRIBUTES_HEADER,
    METHOD_KEY,
    NAME_KEY,
    SERVER_TIMING_HEADER,
    VERSION_KEY,
)
from ..shared.media_types import JSON
from ..shared.model_names import MODEL_NAME
from ..shared.tfs_api import DEFAULT_METHOD, METHODS, MODELS, REQUEST_KEYS, SIGNATURE_KEY


def quoted(text: str) -> str:
    """`text` as an nginx config string: in double quotes, `\\` and `"` escaped (nginx's parser unescapes them)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def http_variable(header: str) -> str:
    """nginx's variable of a request header: $http_<name, lower case, '-' as '_'>."""
    return "$http_" + header.lower().replace("-", "_")


# ---- 1. The headers ----------------------------------------------------------------------------------------------
# The custom attributes the route can follow: tfs-model-name, tfs-model-version and tfs-method (app/context.py's
# tfs_attributes reads the same keys), each at most once, with values the app accepts, among other attributes that
# hold no `tfs-` in any case; no blank anywhere (so that nginx 1.23's join of two header lines, ", ", never passes),
# no ".." (never in a URL), at most 18 version digits (always within int64). Anything else is the app's to read.
_TFS_ITEM = "|".join(
    (f"{NAME_KEY}={MODEL_NAME.pattern}", f"{VERSION_KEY}=[0-9]{{1,18}}", f"{METHOD_KEY}=(?:{'|'.join(METHODS)})")
)
_OTHER_ITEM = r"(?:(?!(?i:tfs-))[!-+\--~])*"  # printable ASCII but ',' and ' ', and no tfs- at any place
_ITEM = f"(?:{_TFS_ITEM}|{_OTHER_ITEM})"
ATTRIBUTES = "^(?!.*\\.\\.)" + "".join(f"(?!.*{key}=.*{key}=)" for key in ATTRIBUTE_KEYS) + f"{_ITEM}(?:,{_ITEM})*$"


class HeaderRule(NamedTuple):
    """A request takes the route only when every rule's header holds one of the values it `takes` (map keys: a
    string, or a regex after `~`, `~*` for any case). One rule per header; add a condition here and nowhere else."""

    header: str
    takes: tuple[str, ...]


HEADER_RULES = (
    HeaderRule("Content-Type", (rf"~*^{re.escape(JSON)}[ \t]*(;.*)?$",)),  # JSON, parameters allowed
    HeaderRule("Accept", ("", "*/*", f"~*^{re.escape(JSON)}$")),  # JSON, without parameters (q=0 refuses it)
    HeaderRule("Content-Encoding", ("",)),  # the model servers read plain bodies only
    HeaderRule("Transfer-Encoding", ("",)),  # no chunked body: the mirror below needs its length
    HeaderRule(CUSTOM_ATTRIBUTES_HEADER, ("", "~" + ATTRIBUTES)),
)
# The headers a repeated line of which must not split the routes. nginx before 1.23 keeps only a header's first
# line in $http_<name> (it cannot see the others), so there the app is handed that line too, and both routes read
# the same value; 1.23 joins the lines with ", ", which no rule takes: such a request goes to the app whole.
JOINED_HEADER_LINES = (1, 23, 0)
HANDED_OVER = ("Content-Type", "Accept", "Content-Encoding", CUSTOM_ATTRIBUTES_HEADER)


def _rule_variable(rule: HeaderRule) -> str:
    """$sagemaker_direct_<header> (short: nginx's variables hash takes names of about 50 characters at most)."""
    name = http_variable(rule.header).removeprefix("$http_")
    return "$sagemaker_direct_" + name.removeprefix("x_amzn_sagemaker_")


def flag_map(source: str, variable: str, keys: list[str] | tuple[str, ...]) -> str:
    """A map setting `variable` to 1 when `source` is one of `keys` (a string, or a regex after `~`), else 0."""
    return (
        f"    map {source} {variable} {{\n        default 0;\n"
        + "".join(f"        {quoted(key)} 1;\n" for key in keys)
        + "    }\n"
    )


def header_maps() -> str:
    """A map per rule (1 when its header is taken), and $sagemaker_direct: 1 for a POST all of whose rules hold."""
    maps = [flag_map(http_variable(rule.header), _rule_variable(rule), rule.takes) for rule in HEADER_RULES]
    every = "".join(_rule_variable(rule) for rule in HEADER_RULES)
    maps.append(
        f'    map "$request_method:{every}" $sagemaker_direct {{\n        default 0;\n'
        f'        "POST:{"1" * len(HEADER_RULES)}" 1;\n    }}\n'
    )
    return "".join(maps)


def target_maps(default_model: str) -> str:
    """The parts of MODEL_SERVER_PATH from the custom attributes (which the rules above have already checked):
    /v1/models/<name, else the default model>[/versions/<version>]:<method, else predict>."""
    attributes = http_variable(CUSTOM_ATTRIBUTES_HEADER)
    parts = (
        ("model", default_model, NAME_KEY, "$attr_model"),
        ("version", "", VERSION_KEY, "/versions/$attr_version"),
        ("method", DEFAULT_METHOD, METHOD_KEY, "$attr_method"),
    )
    return "".join(
        f"    map {attributes} $sagemaker_direct_{part} {{\n        default {quoted(default)};\n"
        f"        {quoted(f'~(?:^|,){key}=(?<attr_{part}>[^,]+)')} {quoted(value)};\n    }}\n"
        for part, default, key, value in parts
    )


MODEL_SERVER_PATH = f"{MODELS}/$sagemaker_direct_model$sagemaker_direct_version:$sagemaker_direct_method"


# ---- 2. The body -------------------------------------------------------------------------------------------------
# One JSON object whose first key is a TFS one, followed by nothing but blanks: TFS's parser stops after the first
# JSON value (JSON lines would be answered for their first line only), and a flat list or a generic object would
# cost a model server call and the client's connection (nginx closes it after an intercepted 400). The pattern skips
# strings and counts braces outside them, through NESTING levels of objects written out (no recursion: PCRE's JIT
# stack cannot run out; a deeper body matches nothing and goes to the app). Possessive: one pass, no backtracking.
NESTING = 16
_BLANKS = r"[ \t\r\n]*"
_STRING = r'"(?:[^"\\]++|\\.)*+"'
_OTHER = r'[^{}"]++'
_TFS_KEY = '"(?:' + "|".join(map(re.escape, (*REQUEST_KEYS, SIGNATURE_KEY))) + ')"'  # tfs_api's


def _object(levels: int) -> str:
    """An object holding objects `levels` deep at most: `{`, then strings, other bytes and objects, then `}`."""
    inner = f"{_OTHER}|{_STRING}" + (f"|{_object(levels - 1)}" if levels > 1 else "")
    return rf"\{{(?:{inner})*+\}}"


SINGLE_TFS_OBJECT = (
    rf"^{_BLANKS}\{{{_BLANKS}{_TFS_KEY}(?:{_OTHER}|{_STRING}|{_object(NESTING - 1)})*+\}}"
    rf"{_BLANKS}\z"
)
# Bodies under LOOKED_AT bytes are kept in memory and looked at; larger ones go to the app. nginx keeps a body of
# up to a quarter more than client_body_buffer_size in memory (and the bytes that came with the request's head).
# PCRE stops a match after 10,000,000 steps of its JIT (its default match limit, which nginx keeps), and the pattern
# takes at most 2 steps for 3 bytes (a body of `{1}` or `{}` objects): 7.5 MiB stay below 5.3 million. SageMaker's
# real-time requests are at most 6 MB.
SNIFF_BUFFER = 6 * 1024 * 1024
LOOKED_AT = SNIFF_BUFFER + SNIFF_BUFFER // 4


# ---- 3. Server-Timing --------------------------------------------------------------------------------------------
# SAGEMAKER_SERVER_TIMING: the model server's time to answer (its header) and the request's so far, in whole
# milliseconds (nginx's resolution), from regex maps: nginx has no arithmetic. The two come from different clocks
# (nginx's monotonic one for upstreams, the wall clock for $request_time), each cut to the millisecond, so the
# request's can read 1 ms less: `total` is the later of the two (a longer number, or the same length and a greater
# digit after a common prefix).
_FRACTION = r"~^0\.0*(?<ms>[0-9]+)$"  # 0.004 -> 4
_SECONDS = r"~^(?<s>[1-9][0-9]*)\.(?<ms>[0-9]{3})$"  # 12.345 -> 12345


def _milliseconds(seconds: str, ms: str) -> str:
    """A map of nginx's seconds ("0.004", "12.345") to whole milliseconds ("4", "12345")."""
    return (
        f'    map {seconds} {ms} {{\n        default "";\n'
        f"        {quoted(_FRACTION)} $ms;\n        {quoted(_SECONDS)} $s$ms;\n    }}\n"
    )


_LONGER = "^(?=(?<longer>[0-9](?&longer)[0-9]|[0-9]+:)$)(?<ms>[0-9]+):"
_GREATER = (
    "^(?=(?<same>[0-9](?&same)[0-9]|:)$)(?<ms>(?<prefix>[0-9]*)(?:"
    + "|".join(f"{digit}(?=[0-9]*:\\k<prefix>[0-{digit - 1}])" for digit in range(1, 10))
    + ")[0-9]*):"
)
LATER = (_LONGER, _GREATER)  # "<a>:<b>" with a > b matches one of them, capturing a as `ms`

SERVER_TIMING_MAPS = (
    _milliseconds("$upstream_header_time", "$sagemaker_header_ms")
    + _milliseconds("$request_time", "$sagemaker_request_ms")
    + '    map "$sagemaker_header_ms:$sagemaker_request_ms" $sagemaker_total_ms {\n'
    + "        default $sagemaker_request_ms;\n"
    + "".join(f"        {quoted('~' + pattern)} $ms;\n" for pattern in LATER)
    + "    }\n"
)
SERVER_TIMING = (
    f"            add_header {SERVER_TIMING_HEADER} "
    '"model_server;dur=$sagemaker_header_ms, total;dur=$sagemaker_total_ms" always;\n'
)

# ---- 4. The model servers' errors --------------------------------------------------------------------------------
# Every error status the model servers answer with (TensorFlow Serving's map of gRPC codes to HTTP). CANCELLED (499)
# is not among them: nginx's error_page cannot take it, and the model servers answer it only to a client that has gone.
MODEL_SERVER_ERRORS = (400, 401, 403, 404, 409, 413, 429, 500, 501, 502, 503, 504)
# The ones the app may answer otherwise, for /invocations: the app reads the body before the model server does, and
# answers a body that is not UTF-8 or not valid JSON (which the pattern above cannot tell) 400 in its own words, where
# the model servers answer 400 in theirs. Every other error the app would pass on byte for byte (the default output
# handler passes a model server's error answer on as it is), so nginx passes it straight through, untouched: an
# error nginx intercepts costs a second round trip, and after a 400, 413, 500 or 501 the client's connection (nginx
# drops keep-alive then). The tests of one behaviour decide this list: with 400 passed through, test_stack_direct_route
# finds the rows "invalid json" and "not utf-8" answered differently by the two routes.
APP_ANSWERS_OTHERWISE = (400,)
UNREACHED = (502, 504)  # nginx's own, when it cannot reach or hear from the model servers: the app asks again
BODY_REFUSED = 418  # @model_server's hand-over of a body the pattern refuses
# InvokeEndpoint on the direct route (runtime_route.py): the app turns every error of the container into the
# operation's ModelError, so all of them go to it.
OPERATION_TO_APP = (BODY_REFUSED, *MODEL_SERVER_ERRORS)
INVOCATIONS_TO_APP = (BODY_REFUSED, *APP_ANSWERS_OTHERWISE, *UNREACHED)
