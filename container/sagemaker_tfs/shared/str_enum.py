"""`enum.StrEnum` on every Python we support: it is new in 3.11, and the real TensorFlow Serving bases (Ubuntu
22.04) ship 3.10. Members are strings whose str() and format() are their values, as with 3.11's."""

from __future__ import annotations

import enum
import sys

if sys.version_info >= (3, 11):
    StrEnum = enum.StrEnum
else:

    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, spec: str) -> str:
            return str.__format__(self, spec)
