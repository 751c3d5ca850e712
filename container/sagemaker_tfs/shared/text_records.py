"""The readers of the two text formats whose records are lines or rows, shared by the default handler (codecs.py)
and the inference toolkit's default input_fn (toolkit/arrays.py), so that both accept the same bodies and name a
problem with the same words and line numbers."""

from __future__ import annotations

import csv
import io
import json
from typing import Iterator

from ..errors import HandlerError


def csv_rows(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line it starts on, fields) of each row of an RFC 4180 text, blank lines skipped (a quoted field may span
    lines); HandlerError 400 when the text is not valid CSV or a row is not as wide as the first."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    width = first_line = 0
    line = 1  # where the next row starts
    try:
        for fields in reader:
            if fields and not (len(fields) == 1 and not fields[0].strip()):  # else a blank line
                if not width:
                    width, first_line = len(fields), line
                elif len(fields) != width:
                    raise HandlerError(400, f"CSV line {line} has {len(fields)} field(s) but line {first_line} has "
                                            f"{width}: every row must have the same number of fields")
                yield line, fields
            line = reader.line_num + 1
    except csv.Error as exc:
        raise HandlerError(400, f"CSV line {line} is not valid CSV: {exc}") from None


def json_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line without surrounding spaces) of each non-blank line of a JSON lines text."""
    for number, line in enumerate(text.split("\n"), 1):
        line = line.strip(" \t\r")
        if line:
            yield number, line


def not_one_value(number: int, exc: json.JSONDecodeError) -> HandlerError:
    """The 400 for a JSON lines line that is not one JSON value."""
    return HandlerError(400, f"JSON lines: line {number} is not one JSON value: {exc.msg} at column {exc.colno}")
