"""The local SageMaker Runtime API's member checks (runtime_api/members.py): a ValidationError (400) in SageMaker's
words, or nothing, as a reference computes it from the service model's constraints.

The first byte picks one uri or header member of an operation; the rest is its value as the app reads it (latin-1,
WSGI's). The reference evaluates a pattern's PCRE text (members.pcre_pattern: what nginx runs,
stack/runtime_route.py) with Python's `re` where their syntax agrees: ASCII classes (PCRE without UCP, like Java's
defaults), `\\z` as Python's `\\Z`; an integer is ASCII digits with an optional sign. nginx's own engine reads the
corpus in test/fuzz/test_runtime_members_pcre.py.
"""

import re

from sagemaker_tfs.runtime_api import members
from sagemaker_tfs.runtime_api.errors import RuntimeApiError

MODULES = ("sagemaker_tfs.runtime_api.members",)
MAX_LEN = 1200  # past the longest limit (1024)
CHECKED = [
    (operation, member)
    for operation, rows in members.OPERATIONS.items()
    for member in rows
    if member.location != "body"
]
_INTEGER = re.compile(r"[+-]?[0-9]+")
_REFERENCE = {
    member.pattern: re.compile(members.pcre_pattern(member.pattern).replace(r"\z", r"\Z"), re.ASCII)
    for _, member in CHECKED
    if member.pattern is not None
}


def member_value(data: bytes) -> tuple[str, members.Member, str]:
    """The operation, member and value an input stands for (the replay against nginx's PCRE reads them too)."""
    operation, member = CHECKED[data[0] % len(CHECKED)]
    return operation, member, data[1:].decode("latin-1")


def expected(member: members.Member, value: str) -> list[str]:
    """What SageMaker says the value breaks."""
    if member.kind == "integer":
        if not _INTEGER.fullmatch(value):
            return ["Member must be an integer"]
        if member.min is not None and int(value) < member.min:
            return [f"Member must have value greater than or equal to {member.min}"]
        if member.max is not None and int(value) > member.max:
            return [f"Member must have value less than or equal to {member.max}"]
        return []
    broken = []
    if member.min is not None and len(value) < member.min:
        broken.append(f"Member must have length greater than or equal to {member.min}")
    if member.max is not None and len(value) > member.max:
        broken.append(f"Member must have length less than or equal to {member.max}")
    if member.pattern is not None and not _REFERENCE[member.pattern].fullmatch(value):
        broken.append(f"Member must satisfy regular expression pattern: {member.pattern}")
    return broken


def seeds() -> list[bytes]:
    # test/unit/test_runtime_api_members.py's values, each for every member
    values = [
        "", "tfs-model-name=m", "\x00\x7f", "\u00e9", "a", "a b~", "x" * 64, " a", "a\n", "a\u00e9", "a\x7f",
        "my-endpoint", "a--b", "my_endpoint", "-a", "a-", "out-1_x.json", "a.b.c", ".a", "a/b", "NEW_SESSION",
        "NEW_SESSIONS", "s-1", "s_1", "e" * 64, "e_" * 32, "3601", "60", "/data/in.json", "application/json", "*/*",
        "i" * 64, "secret\u00e9",
    ]  # fmt: skip
    return [bytes([index]) + value.encode("latin-1") for index in range(len(CHECKED)) for value in values]


def one_input(data: bytes) -> None:
    if not data:
        return
    operation, member, value = member_value(data)
    endpoint = value if member.location == "uri" else "e"
    headers = {member.location_name: value} if member.location == "header" else {}
    broken = expected(member, value)
    try:
        members.check(operation, endpoint, headers.get)
    except RuntimeApiError as exc:
        assert (exc.status, exc.code) == (400, "ValidationError"), (exc.status, exc.code)
        quoted = "" if member.sensitive else f" '{value}'"
        errors = [f"Value{quoted} at '{member.camel}' failed to satisfy constraint: {text}" for text in broken]
        count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected"
        assert exc.message == f"{count}: {'; '.join(errors)}", (exc.message, broken)
    else:
        assert broken == [], (operation, member.name, value, broken)
