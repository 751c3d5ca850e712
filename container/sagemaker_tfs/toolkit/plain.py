"""json.dumps' fallback for what toolkit scripts hand over: numpy arrays and scalars (anything with .tolist())
as plain Python values, without importing numpy."""

from __future__ import annotations

from typing import Any


def json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
