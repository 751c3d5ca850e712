"""Which handler contract a script uses, decided from the names it defines: the one detector.

The proxy (proxy/script.py) asks it about an imported module's attributes, `package-model` (packaging.py) about
the names found in the source without running it; each words its own error around the same finding.
"""

from __future__ import annotations

from enum import Enum
from typing import Collection


class Contract(Enum):
    """How /invocations reaches the script. The values are what `package-model check` prints."""

    HANDLER = "handler"  # handler(data, context) answers each request
    PAIR = "input_handler/output_handler"  # input_handler -> model server -> output_handler
    DEFAULT = "default"  # no script: the default handler (codecs.py)


HANDLER_NAMES = ("handler", "input_handler", "output_handler")
HOW_TO_FIX = ("define handler(data, context), or both input_handler(data, context) and "
              "output_handler(response, context)")


class IncompleteContract(ValueError):
    """The names fit no contract; `present` lists the handler names the script does define (in HANDLER_NAMES order)."""

    def __init__(self, present: tuple[str, ...]):
        super().__init__(f"defines {', '.join(present) or 'no handler'}: {HOW_TO_FIX}")
        self.present = present


def detect(names: Collection[str]) -> Contract:
    """The contract of a script whose module-level names are `names`, as the original container chooses:
    `handler` wins, else both `input_handler` and `output_handler`; else IncompleteContract."""
    if "handler" in names:
        return Contract.HANDLER
    if "input_handler" in names and "output_handler" in names:
        return Contract.PAIR
    raise IncompleteContract(tuple(name for name in HANDLER_NAMES if name in names))
