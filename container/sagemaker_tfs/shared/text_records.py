"""The readers and the line layout of the two text formats whose records are lines or rows (CSV, JSON lines).

The readers are shared by the default handler (codecs.py) and the inference toolkit's default input_fn
(toolkit/arrays.py), so that both accept the same bodies and name a problem with the same words and line numbers;
the Batch Transform runner's DataProcessing reads CSV with the same reader (transform/dataprocessing.py). Both
writers of predictions lay their lines out with `lines` and `csv_line`."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..errors import HandlerError


def csv_reader(text: str) -> Any:
    """A csv.reader of an RFC 4180 text: the fields of each row, blank lines included (csv.Error when the text is not
    valid CSV; line_num counts the lines read). Read with newline="": CR, LF and CRLF end a row, and a quoted field
    keeps the line breaks it holds as they are."""
    return csv.reader(io.StringIO(text, newline=""), strict=True)


def csv_rows(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line it starts on, fields) of each row of an RFC 4180 text, blank lines skipped (a quoted field may span
    lines); HandlerError 400 when the text is not valid CSV or a row is not as wide as the first."""
    reader = csv_reader(text)
    width = first_line = 0
    line = 1  # where the next row starts
    try:
        for fields in reader:
            if fields and not (len(fields) == 1 and not fields[0].strip()):  # else a blank line
                if not width:
                    width, first_line = len(fields), line
                elif len(fields) != width:
                    raise HandlerError(
                        400,
                        f"CSV line {line} has {len(fields)} field(s) but line {first_line} has "
                        f"{width}: every row must have the same number of fields",
                    )
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


# ---- writing: one line per record ----
# The default handler (codecs.py) and the toolkit's default output_fn (toolkit/arrays.py) write different bytes for
# the same media type, by contract. The toolkit's CSV is the inference toolkit's encoder's, numpy.savetxt(fmt="%s",
# delimiter=","): str() of each value, a newline after every line (docs/toolkit-contract.md §6); its JSON lines are
# its JSON (json.dumps) of each item. The default handler writes the model server's predictions as the module
# docstring of codecs.py says: compact JSON, RFC 4180 quoting, floats and booleans as TensorFlow Serving writes them,
# and no newline after the last line (Batch Transform's AssembleWith=Line adds one per answer). The layout is shared.


def lines(records: Iterable[Any], line: Callable[[Any], str], newline_after_last: bool = False) -> str:
    """`line(record)` of each record, one per line: separated by newlines, or each ended by one."""
    if newline_after_last:
        return "".join(line(record) + "\n" for record in records)
    return "\n".join(map(line, records))


def csv_line(values: Iterable[Any], field: Callable[[Any], str] = str) -> str:
    """One CSV line of these values, `field(value)` each, without its line break."""
    return ",".join(map(field, values))
