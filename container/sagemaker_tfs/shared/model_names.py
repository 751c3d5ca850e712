"""What a model_name may be. A name is an opaque id: it is never used in a filesystem path (docs/multi-model.md §9)."""

from __future__ import annotations

import hashlib
import re

MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")


def name_problem(name: object) -> str | None:
    """Why `name` is not a valid model_name, or None."""
    if not isinstance(name, str):
        return f"must be a string, not {type(name).__name__}"
    if not name:
        return "must not be empty"
    if len(name) > 255:
        return f"must be at most 255 characters, not {len(name)}"
    if not MODEL_NAME.fullmatch(name):
        return "must start with a letter or digit and hold only letters, digits, '.', '_' and '-'"
    return None


def digest(name: str) -> str:
    """A short digest of a name, for runtime file and module names."""
    return hashlib.sha256(name.encode()).hexdigest()[:16]
