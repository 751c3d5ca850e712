"""nginx's side of the runtime API's member checks, on the runtime_members corpus and seeds: a value the direct route
vouches for (stack/runtime_route.py's PCRE, run by pcre2test with its JIT, as nginx runs it) is one the app's checks
(runtime_api/members.py) take. Per corpus, not per fuzz input: pcre2test is a process."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from sagemaker_tfs.runtime_api import members
from sagemaker_tfs.runtime_api.errors import RuntimeApiError
from sagemaker_tfs.stack import runtime_route

from fuzz import targets
from fuzz.targets import runtime_members


def _values() -> dict[str, list[str]]:
    """The values nginx can be sent, by the member that reads them (InvokeEndpoint's, vouched for by a pattern)."""
    found: dict[str, list[str]] = {}
    inputs = [path.read_bytes() for path in targets.inputs("runtime_members")] + runtime_members.seeds()
    for data in filter(None, inputs):
        operation, member, value = runtime_members.member_value(data)
        if operation != runtime_route.OPERATION or member.name in (*runtime_route.REFUSED, "TargetVariant"):
            continue
        # nginx reads an empty header as none; no CR, LF or NUL in a header line, no '/' in the endpoint's segment
        banned = "\0" if member.location == "uri" else "\0\r\n"
        if value and not set(banned + "/" * (member.location == "uri")) & set(value):
            found.setdefault(member.name, []).append(value)
    return found


def _pcre2test(pattern: str, subjects: list[str]) -> list[bool]:
    script = "/" + pattern.replace("/", "\\/") + "/jit\n"
    script += "".join("".join(f"\\x{{{ord(char):02x}}}" for char in subject) + "\n" for subject in subjects)
    out = subprocess.run(
        [shutil.which("pcre2test") or "pcre2test", "-q"], input=script, capture_output=True, text=True, check=True
    ).stdout.splitlines()[1:]
    matched: list[bool] = []
    for line in out:
        if line.startswith("\\x{"):
            matched.append(False)
        elif re.match(r"\s*0: ", line):
            matched[-1] = True
    assert len(matched) == len(subjects), out[:20]
    return matched


@pytest.mark.skipif(shutil.which("pcre2test") is None, reason="pcre2test (pcre2-utils) is not installed")
@pytest.mark.parametrize("name", sorted(_values()))
def test_what_nginx_vouches_for_the_app_takes(name: str) -> None:
    member = members.member(runtime_route.OPERATION, name)
    values = _values()[name]
    vouched = _pcre2test(runtime_route._value_pattern(member), values)
    endpoint = "e"
    taken_by_nginx = [value for value, taken in zip(values, vouched, strict=True) if taken]
    refused_by_app = []
    for value in taken_by_nginx:
        header = {member.location_name: value}.get if member.location == "header" else {}.get
        try:
            members.check(runtime_route.OPERATION, value if member.location == "uri" else endpoint, header)
        except RuntimeApiError as exc:
            refused_by_app.append((value, str(exc)))
    assert refused_by_app == []


@pytest.mark.skipif(shutil.which("pcre2test") is None, reason="pcre2test (pcre2-utils) is not installed")
def test_an_endpoint_name_ending_with_a_newline_is_not_vouched_for() -> None:
    """PCRE's $ matches before a final newline (fuzz/corpus/runtime_members/finding-endpoint-name-ending-...)."""
    member = members.member(runtime_route.OPERATION, "EndpointName")
    assert _pcre2test(runtime_route._value_pattern(member), ["a\n", "a", "a" * 63 + "\n", "a" * 63]) == [
        False,
        True,
        False,
        True,
    ]
