"""The one rule for version folders, used by `serve` (model_tree.py), `package-model` and the model server.

A version folder's name is a non-negative int64 written in ASCII digits, leading zeros allowed (`00000123` is
version 123), as TensorFlow Serving reads it. Anything else (hidden folders, `code`, `v1`, `1.0`, `-1`, `１２` in
full-width digits, a number past 2**63-1) is not a version: the model server would never load it, so `serve`
must not count it either.
"""

from __future__ import annotations

INT64_MAX = 2**63 - 1


def parse_version(name: str) -> int | None:
    """The version number a folder name stands for, or None when it is not a version folder."""
    if not (name.isascii() and name.isdigit()):  # str.isdigit alone accepts any Unicode digit
        return None
    version = int(name)
    return version if version <= INT64_MAX else None


def is_version_name(name: str) -> bool:
    return parse_version(name) is not None


def why_not_a_version(name: str) -> str | None:
    """For a name that looks like a number but is not a version: what is wrong with it (else None)."""
    if not name.isdigit() or is_version_name(name):
        return None
    if not name.isascii():
        return f"{name!r} is not a version number: write it with the ASCII digits 0-9"
    return f"{name!r} is not a version number: versions are at most {INT64_MAX}"
