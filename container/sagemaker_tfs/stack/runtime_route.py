"""A single-model endpoint's InvokeEndpoint on the direct route (SAGEMAKER_LOCAL_RUNTIME_API=true), as nginx config.

InvokeEndpoint asks the container what `/invocations` answers. When /invocations would take the direct route, nginx
sends the operation there too, with the answer tagged as the operation's (`x-Amzn-Invoked-Production-Variant`), if it
can vouch that the operation's own checks pass: every member within the service model's constraints (the table the
runtime API checks with, runtime_api/members.py), none that the local endpoint refuses, a body it takes. Anything
else, and any error answer of the model servers, goes to the app's workers, which check the request and answer it
(runtime_api/realtime.py): like the direct route's, these rules only ever pick a route, never shape an answer, and
vouch for less rather than more. nginx reads a header sent empty as one not sent; so does the operation everywhere.
"""

from __future__ import annotations

from ..config import Settings
from ..runtime_api import members, realtime
from ..shared.headers import INFERENCE_ID_HEADER, TARGET_MODEL_HEADER
from .direct_route import flag_map, http_variable, quoted

OPERATION = realtime.OPERATION
# Present, these go to the app: refused there (a single-model endpoint has no targets), or a session it checks
REFUSED = (*realtime.UNSUPPORTED, "TargetModel", "SessionId")
ENDPOINT_VARIABLE = "$sagemaker_endpoint"  # the EndpointName, captured by the operation's location
# In the direct route's locations: the operation's answer names the variant; a request the model servers refuse goes
# to the app at its own path (the workers' InvokeEndpoint), /invocations' at /invocations
VARIANT_HEADER_LINE = f"            add_header {realtime.VARIANT_HEADER} $sagemaker_runtime_variant;\n"
APP_URI = "$sagemaker_app_uri"
# ... and logs the operation's line (log_maps), after the access log's
LOG_LINE = "            access_log /dev/stdout runtime_invocation if=$sagemaker_runtime_variant;\n"


def _value_pattern(member: members.Member) -> str:
    """A PCRE for a member's value within its length and pattern (nginx's: in bytes, as the app's latin-1 text). The
    end is \\z: PCRE's $ also matches before a final newline, which an EndpointName can end with (%0A in the URI)."""
    length = f"(?=[\\s\\S]{{{member.min or 0},{member.max}}}\\z)" if member.max is not None else ""
    pattern = members.pcre_pattern(member.pattern) if member.pattern is not None else "[\\s\\S]*"
    return f"^{length}(?:{pattern})\\z"


def _taken(member: members.Member, variant: str) -> list[str]:
    """The map keys (regexes after `~`, or exact strings) of the values nginx vouches for: always the empty one."""
    if member.name in REFUSED:
        return [""]
    if member.name == "TargetVariant":
        assert member.regex is not None and member.max is not None  # (the service model bounds TargetVariant)
        return ["", variant] if member.regex.fullmatch(variant) and len(variant) <= member.max else [""]
    return ["", "~" + _value_pattern(member)]


def _body_lengths(limit: int) -> str:
    """Content-Lengths below `limit` with fewer digits than it (a body the limit surely takes), not 0."""
    return f"~^[1-9][0-9]{{0,{len(str(limit)) - 2}}}$"


def log_maps(settings: Settings) -> str:
    """What every InvokeEndpoint's log line needs (the operation's location and the direct route's log it:
    `request <id>: InvokeEndpoint <endpoint>, inference id <id or None>[, target model <target>]`), and
    $sagemaker_runtime_variant, the variant for the operation's requests, empty for any other."""
    inference_id, target = http_variable(INFERENCE_ID_HEADER), http_variable(TARGET_MODEL_HEADER)
    return (
        f"    map {inference_id} $sagemaker_inference_id {{\n        default {inference_id};\n"
        '        "" None;\n    }\n'
        f'    map {target} $sagemaker_target_logged {{\n        default ", target model {target}";\n'
        '        "" "";\n    }\n'
        f"    log_format runtime_invocation 'request $sagemaker_logged_id: {OPERATION} {ENDPOINT_VARIABLE}, "
        "inference id $sagemaker_inference_id$sagemaker_target_logged';\n"
        '    map $request_uri $sagemaker_runtime_variant {\n        default "";\n'
        f'        "~^/endpoints/" {quoted(settings.local_runtime_variant)};\n    }}\n'
    )


def maps(settings: Settings) -> str:
    """A map per member (1 when nginx vouches for its value), then $sagemaker_runtime_direct: 1 when it vouches for
    all and /invocations would take the direct route ($sagemaker_direct); with $sagemaker_app_uri, where the direct
    route's @app sends a request (the operation's own path, or /invocations)."""
    lines, variables = [], []
    for member in members.OPERATIONS[OPERATION]:
        variable = f"$sagemaker_rt_{member.camel}"
        if member.location == "uri":
            source = ENDPOINT_VARIABLE
            keys = ["~" + _value_pattern(member)]
        elif member.location == "body":
            source = "$content_length"
            keys = [_body_lengths(settings.local_runtime_max_payload_mb * realtime.MIB)]
        else:
            source = http_variable(member.location_name)
            keys = _taken(member, settings.local_runtime_variant)
        lines.append(flag_map(source, variable, keys))
        variables.append(variable)
    every = "".join(variables)
    lines.append(
        f'    map "{every}$sagemaker_direct" $sagemaker_runtime_direct {{\n        default 0;\n'
        f'        "{"1" * (len(variables) + 1)}" 1;\n    }}\n'
    )
    lines.append(
        "    map $request_uri $sagemaker_app_uri {\n        default /invocations;\n"
        '        "~^/endpoints/" $request_uri;\n    }\n'
    )
    return "".join(lines)
