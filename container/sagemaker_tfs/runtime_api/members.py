"""An operation's members checked as SageMaker checks them, from the service model's own table (service_model.py):
length, pattern, range and presence, before anything else, with SageMaker's ValidationError text:

    1 validation error detected: Value 'my_model' at 'endpointName' failed to satisfy constraint: Member must
    satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*

(several: `2 validation errors detected: ...; ...`; a sensitive member's value is not quoted). Patterns are matched
whole, as SageMaker's validator matches them, after translating the Java classes the model uses (`\\p{ASCII}`,
`\\p{Print}`, `\\z`). The body's size is the operations' own check (their limits and texts). Where the local endpoint
takes more than SageMaker (InvokeEndpointAsync's InputLocation may be a local path), LOCAL_EXTENSIONS skips that
pattern; the operation checks what it takes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from .errors import validation
from .service_model import MEMBERS

LOCAL_EXTENSIONS = {("InvokeEndpointAsync", "InputLocation")}  # file:// URIs and local paths too (asynchronous.py)
_INTEGER = re.compile(r"[+-]?[0-9]+")  # Java's integer text: not Python's int() with its blanks and '_' separators
_JAVA_CLASSES = {r"\p{ASCII}": r"\x00-\x7f", r"\p{Print}": r"\x20-\x7e"}

T = TypeVar("T")


@dataclass(frozen=True)
class Member:
    name: str
    kind: str  # the shape's type: string, integer, blob
    location: str  # uri, header, body
    location_name: str
    min: int | None
    max: int | None
    pattern: str | None  # the model's text, quoted in messages
    regex: re.Pattern[str] | None
    sensitive: bool

    @property
    def camel(self) -> str:
        """How SageMaker's messages name the member: endpointName, customAttributes."""
        return self.name[0].lower() + self.name[1:]


def python_regex(java: str) -> re.Pattern[str]:
    """A service model pattern (Java's syntax) as a Python regex with the same meaning for the constructs the model
    uses: \\p{ASCII} and \\p{Print} (inside a class or alone) and \\z. Classes such as \\s and \\S are ASCII's, as in
    Java's and PCRE's defaults (Python's \\s would also take \\x1c-\\x1f, \\x85 and \\xa0)."""
    return re.compile(pcre_pattern(java).replace(r"\z", r"\Z"), re.ASCII)


def pcre_pattern(java: str) -> str:
    """A service model pattern as PCRE's (nginx's regexes, stack/runtime_route.py): Java's classes as ranges, the
    rest as it is (PCRE has \\A and \\z)."""
    for name, ranges in _JAVA_CLASSES.items():
        java = java.replace(f"[{name}]", f"[{ranges}]").replace(name, f"[{ranges}]")
    return java


def _constraint(limits: Mapping[str, object], key: str, kind: type[T]) -> T | None:
    """One constraint of the generated table (its values are typed `object` there), checked to be a `kind`."""
    value = limits.get(key)
    if value is not None and not isinstance(value, kind):
        raise TypeError(f"service_model.py: {key} {value!r} is not of type {kind.__name__}")
    return value


def _members(operation: str) -> tuple[Member, ...]:
    members: list[Member] = []
    for name, kind, location, location_name, _required, limits in MEMBERS[operation]:
        pattern = None if (operation, name) in LOCAL_EXTENSIONS else _constraint(limits, "pattern", str)
        members.append(
            Member(
                name,
                kind,
                location,
                location_name,
                _constraint(limits, "min", int),
                _constraint(limits, "max", int),
                pattern,
                python_regex(pattern) if pattern is not None else None,
                _constraint(limits, "sensitive", bool) or False,
            )
        )
    return tuple(members)


OPERATIONS = {operation: _members(operation) for operation in MEMBERS}


def member(operation: str, name: str) -> Member:
    """One member of the operation, by the service model's name (its header, its limits)."""
    return next(item for item in OPERATIONS[operation] if item.name == name)


def _violations(member: Member, value: str) -> list[str]:
    """What the value breaks, in SageMaker's words (a Member must ...)."""
    if member.kind == "integer":
        if not _INTEGER.fullmatch(value):
            return ["Member must be an integer"]
        number = int(value)
        if member.min is not None and number < member.min:
            return [f"Member must have value greater than or equal to {member.min}"]
        if member.max is not None and number > member.max:
            return [f"Member must have value less than or equal to {member.max}"]
        return []
    broken: list[str] = []
    if member.min is not None and len(value) < member.min:
        broken.append(f"Member must have length greater than or equal to {member.min}")
    if member.max is not None and len(value) > member.max:
        broken.append(f"Member must have length less than or equal to {member.max}")
    if member.regex is not None and not member.regex.fullmatch(value):
        broken.append(f"Member must satisfy regular expression pattern: {member.pattern}")
    return broken


def check(operation: str, endpoint: str, header: Callable[[str], str | None]) -> None:
    """RuntimeApiError (ValidationError) naming every uri and header member of the request that breaks the
    service model's constraints; `header(name)` is the request's header (None when absent)."""
    errors: list[str] = []
    for member in OPERATIONS[operation]:
        if member.location == "body":
            continue
        value = endpoint if member.location == "uri" else header(member.location_name)
        if value is None:
            continue  # a required header member: none is (EndpointName and Body are the operations')
        quoted = "" if member.sensitive else f" '{value}'"
        errors.extend(
            f"Value{quoted} at '{member.camel}' failed to satisfy constraint: {broken}"
            for broken in _violations(member, value)
        )
    if errors:
        count = f"{len(errors)} validation error{'s' if len(errors) > 1 else ''} detected"
        raise validation(f"{count}: {'; '.join(errors)}")
