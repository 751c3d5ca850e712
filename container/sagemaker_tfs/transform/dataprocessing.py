"""DataProcessing (InputFilter, JoinSource, OutputFilter) and output assembly (AssembleWith).

Per record, for JSON (application/json, application/jsonlines and its aliases) and CSV (text/csv) only (the types of
media_types.py, the table the default handler reads too):
  1. parse the record (a CSV row becomes a list of strings, RFC 4180), apply InputFilter, serialise it back in the
     same format; with InputFilter `$` the record is sent exactly as read;
  2. the response of a request holding n records is cut into n results, one line each (one result: the whole
     body); a different count fails the request;
  3. JoinSource=Input joins each result to the *original* record: CSV appends the output columns to the input
     columns; a JSON object gets the result under "SageMakerOutput" (replacing an input member of that name);
     any other JSON value becomes {"SageMakerInput": record, "SageMakerOutput": result};
  4. OutputFilter selects from the joined value (or from the result alone without a join), serialised in the
     Accept format.
Assembly: AssembleWith=Line writes a newline after every record's output, None writes them back to back. Without
DataProcessing a response body is one opaque output (a MultiRecord response gets one newline after it); a body
that already ends in a newline still gets one.

Choices where SageMaker's behaviour is not documented ([INF] in docs/batch-transform.md):
  * JSON written by the runner is compact, with members sorted by name and non-ASCII characters kept (the
    output observed in the seed write-up: {"SageMakerOutput":{...},"value":1}).
  * The response of a MultiRecord request is cut at newlines (a trailing newline and `\\r` are ignored); a count
    that differs from the number of records fails the request with "Number of output records (m) does not
    match the number of input records (n)".
  * Unparseable output fails with "Failed to parse output from the algorithm as CSV" (SageMaker's string) or
    "... as JSON"; an unparseable input record fails with "Failed to parse input record as CSV/JSON".
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..shared import media_types
from ..shared.media_types import Format
from ..shared.text_records import csv_reader
from .jsonpath import JsonPath, JsonPathError, compile_path
from .outcomes import FailureKind

# The format of one record: a JSON-lines stream is split into records that are each one JSON value.
_RECORD_FORMATS = {Format.JSON: Format.JSON, Format.JSON_LINES: Format.JSON, Format.CSV: Format.CSV}


class RecordError(ValueError):
    """One record (or one response) cannot be processed; the message is SageMaker-style.

    `kind` is the prefix of the job's FailureReason: AlgorithmError when the container's output is at fault.
    """

    def __init__(self, message: str, kind: FailureKind = FailureKind.CLIENT):
        super().__init__(message)
        self.kind = kind


def data_format(mime: str | None) -> Format | None:
    """The format of one record (Format.JSON or Format.CSV) for a Content-Type/Accept value, or None when records
    of that type cannot be parsed (parameters such as charset ignored)."""
    fmt = media_types.format_of(mime)
    return None if fmt is None else _RECORD_FORMATS.get(fmt)


def parse(data: bytes, fmt: Format, what: str) -> Any:
    kind = FailureKind.ALGORITHM if what.startswith("output") else FailureKind.CLIENT
    try:
        text = data.decode("utf-8")
        if fmt is Format.JSON:
            return json.loads(text)
        rows = list(csv_reader(text))  # blank rows kept: a record is one row
    except (UnicodeDecodeError, ValueError, csv.Error):
        raise RecordError(f"Failed to parse {what} as {fmt.value.upper()}", kind) from None
    if len(rows) > 1:
        raise RecordError(f"Failed to parse {what} as CSV: {len(rows)} rows where one was expected", kind)
    return rows[0] if rows else []


def serialise(value: Any, fmt: Format) -> bytes:
    if fmt is Format.JSON:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode("utf-8")
    if isinstance(value, dict):
        raise RecordError("Unable to write a JSON object as a CSV row: select array elements with the filter")
    row = value if isinstance(value, list) else [value]
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(_csv_field(v) for v in row)
    return out.getvalue().encode("utf-8")


def _csv_field(value: Any) -> Any:
    return json.dumps(value, separators=(",", ":")) if isinstance(value, (dict, list)) else value


def join(record: Any, result: Any, fmt: Format) -> Any:
    if fmt is Format.CSV:
        return list(record) + (list(result) if isinstance(result, list) else [result])
    if isinstance(record, dict):
        return {**record, "SageMakerOutput": result}
    return {"SageMakerInput": record, "SageMakerOutput": result}


def split_response(body: bytes, count: int) -> list[bytes]:
    """One result per record: the whole body for one record, else one line each."""
    if count == 1:
        return [body]
    lines = body.split(b"\n")
    if lines and lines[-1] in (b"", b"\r"):
        lines.pop()
    lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    if len(lines) != count:
        raise RecordError(
            f"Number of output records ({len(lines)}) does not match the number of input records ({count})",
            FailureKind.ALGORITHM,
        )
    return lines


@dataclass(frozen=True)
class DataProcessing:
    """The job's DataProcessing, compiled. `active` is False for the defaults ($, None, $): bytes pass through."""

    input_filter: JsonPath
    output_filter: JsonPath
    join_input: bool
    input_format: Format | None
    output_format: Format | None

    @classmethod
    def build(
        cls,
        input_filter: str | None,
        output_filter: str | None,
        join_source: str | None,
        content_type: str | None,
        accept: str | None,
        inclusive_slice_end: bool = False,
    ) -> DataProcessing:
        return cls(
            input_filter=compile_path(input_filter or "$", inclusive_slice_end),
            output_filter=compile_path(output_filter or "$", inclusive_slice_end),
            join_input=join_source == "Input",
            input_format=data_format(content_type),
            output_format=data_format(accept),
        )

    @property
    def active(self) -> bool:
        return self.join_input or not self.input_filter.is_root or not self.output_filter.is_root

    @property
    def parses_output(self) -> bool:
        return self.join_input or not self.output_filter.is_root

    def request_record(self, record: bytes) -> bytes:
        """What is sent for one record: the record itself, or its InputFilter selection."""
        if self.input_filter.is_root:
            return record
        fmt = self.input_format
        assert fmt is not None  # (job.py refuses an InputFilter for a type without a record format)
        value = parse(record, fmt, "input record")
        return serialise(self._apply(self.input_filter, value), fmt)

    def outputs(self, records: Sequence[bytes | None], body: bytes) -> list[bytes]:
        """The output of each record of one request, from the response body; `records` are the originals."""
        results = split_response(body, len(records))
        if not self.parses_output:
            return results
        fmt, input_fmt = self.output_format, self.input_format
        assert fmt is not None  # (job.py refuses an OutputFilter or a join for an Accept without a record format)
        outputs = []
        for record, result in zip(records, results, strict=True):
            value = parse(result, fmt, "output from the algorithm")
            if self.join_input:
                # (the pipeline keeps every original while DataProcessing is active; job.py refuses a join for a
                # ContentType without a record format)
                assert record is not None and input_fmt is not None
                value = join(parse(record, input_fmt, "input record"), value, fmt)
            outputs.append(serialise(self._apply(self.output_filter, value), fmt))
        return outputs

    @staticmethod
    def _apply(path: JsonPath, value: Any) -> Any:
        try:
            return path.apply(value)
        except JsonPathError as exc:
            raise RecordError(f"Unable to apply JsonPath {exc}") from None


def assemble(outputs: list[bytes], assemble_with: str | None) -> bytes:
    """The bytes written for consecutive outputs."""
    if assemble_with == "Line":
        return b"".join(output + b"\n" for output in outputs)
    return b"".join(outputs)
