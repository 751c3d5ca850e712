"""`enum.StrEnum` on every Python we support: it is new in 3.11, and the real TensorFlow Serving bases (Ubuntu
22.04) ship 3.10. Members are strings whose str() and format() are their values, as with 3.11's."""

from __future__ import annotations

import enum

if hasattr(enum, "StrEnum"):
    StrEnum = enum.StrEnum
else:  # Python 3.10

    class StrEnum(str, enum.Enum):  # type: ignore[no-redef]
        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, spec: str) -> str:
            return str.__format__(self, spec)
