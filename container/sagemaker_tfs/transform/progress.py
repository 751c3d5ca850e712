"""What a person sees: a one-line progress bar on a terminal, and the closing summary of a job."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from .outcomes import Status
from .pipeline import Stats

WIDTH = 24


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return ""


class ProgressBar:
    """Redraws one stderr line (only when it is a terminal). Log lines call `clear()` before they are written."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.started: float | None = None  # the first update: when the containers are ready
        self.drawn = False

    def __call__(self, stats: Stats) -> None:
        if not self.enabled:
            return
        if self.started is None:
            self.started = time.monotonic()
        fraction = min(1.0, stats.bytes_done / stats.bytes_total) if stats.bytes_total else 0.0
        if stats.objects and stats.objects_done == stats.objects:
            fraction = 1.0
        elapsed = time.monotonic() - self.started
        filled = int(fraction * WIDTH)
        failed = f" ({stats.records_failed:,} failed)" if stats.records_failed else ""
        line = (
            f"[{'#' * filled}{'.' * (WIDTH - filled)}] {fraction:4.0%}  objects {stats.objects_done}/"
            f"{stats.objects}  records {stats.records_done:,}{failed}  requests {stats.requests:,}  "
            f"{rate_text(stats.records_done / elapsed if elapsed > 0 else 0)} records/s  {elapsed:,.0f} s"
        )
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
        self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


def rate_text(rate: float) -> str:
    """A rate with the precision it needs: three significant figures below 100 (0.417, 4.17, 41.7), whole numbers
    with thousands separators above (417, 12,345); a one-record job is not `0 records/s`."""
    if rate == 0 or rate >= 99.95:
        return f"{rate:,.0f}"
    return f"{rate:.3g}" if rate >= 0.001 else f"{rate:.1e}"


def render_summary(description: dict[str, Any]) -> str:
    """The closing summary: status, counts, throughput, and what failed."""
    local = description.get("LocalRun", {})
    totals = local.get("Summary", {})
    status = description["TransformJobStatus"]
    lines = [
        f"Transform job {description['TransformJobName']}: {status}"
        + (f" ({description['FailureReason']})" if description.get("FailureReason") else "")
    ]
    if totals:
        rate = totals.get("RecordsPerSecond")
        lines += [
            f"  objects   {totals['Objects']:,} ({totals['ObjectsFailed']:,} failed)",
            f"  records   {totals['Records']:,} ({totals['RecordsFailed']:,} failed)",
            f"  requests  {totals['Requests']:,} ({totals['Retries']:,} retries)",
            f"  bytes     {_size(totals['BytesRead'])} read, {_size(totals['BytesSent'])} sent, "
            f"{_size(totals['BytesWritten'])} written",
            f"  time      {totals['Seconds']:,.1f} s, {rate_text(rate or 0)} records/s",
            f"  output    {description['TransformOutput']['S3OutputPath']}",
        ]
    for obj in local.get("Objects", []):
        if obj["Status"] == Status.COMPLETED:
            continue
        failed = obj["FailedRecords"]
        shown = ", ".join(str(i) for i in failed[:10]) + (", ..." if len(failed) > 10 else "")
        lines.append(
            f"  {obj['Status'].lower()}: {obj['Input']}"
            + (f": {len(failed):,} of {obj['Records']:,} records failed (indexes {shown})" if failed else "")
        )
        for message in obj["Messages"][:3]:
            lines += [f"      {line}" for line in message.splitlines() if line.strip()][:6]
    if local.get("WorkDir"):
        lines.append(f"  container logs and work files: {local['WorkDir']}")
    return "\n".join(lines)
