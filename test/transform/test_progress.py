"""The progress bar `transform` draws on a terminal: what the line says, and that it stays off a file or pipe."""

from __future__ import annotations

import io

import pytest
from sagemaker_tfs.transform import progress
from sagemaker_tfs.transform.pipeline import Stats


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_redraws_in_place_with_the_jobs_totals(monkeypatch):
    clock = iter([100.0, 100.0, 110.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    stream = Terminal()
    bar = progress.ProgressBar(stream)
    bar(Stats(objects=2, bytes_total=1000))  # the first update starts the clock
    bar(
        Stats(
            objects=2,
            objects_done=1,
            records_done=1500,
            records_failed=3,
            requests=1200,
            bytes_total=1000,
            bytes_done=500,
        )
    )
    first, second = stream.getvalue().split("\r")[1:]
    assert first == ("[........................]   0%  objects 0/2  records 0  requests 0  0 records/s  0 s\x1b[K")
    assert second == (
        "[############............]  50%  objects 1/2  records 1,500 (3 failed)  requests 1,200  "
        "150 records/s  10 s\x1b[K"
    )
    bar.clear()
    assert stream.getvalue().endswith("\r\x1b[K")


def test_every_object_done_is_a_full_bar_whatever_the_bytes():
    stream = Terminal()
    progress.ProgressBar(stream)(Stats(objects=1, objects_done=1, bytes_total=0))
    assert stream.getvalue().startswith("\r[########################] 100%  objects 1/1")


def test_nothing_is_drawn_on_a_stream_that_is_not_a_terminal():
    stream = io.StringIO()
    bar = progress.ProgressBar(stream)
    bar(Stats(objects=1))
    bar.clear()
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    "rate, text",
    [(0, "0"), (0.4167, "0.417"), (4.0, "4"), (4.167, "4.17"), (41.67, "41.7"), (416.7, "417"), (12345.6, "12,346")],
)
def test_rates_keep_the_precision_they_need(rate, text):
    assert progress.rate_text(rate) == text


def test_a_one_record_job_draws_and_sums_up_a_rate_below_one(monkeypatch):
    clock = iter([100.0, 100.0, 102.4])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    stream = Terminal()
    bar = progress.ProgressBar(stream)
    bar(Stats(objects=1, bytes_total=10))
    bar(Stats(objects=1, objects_done=1, records_done=1, requests=1, bytes_total=10, bytes_done=10))
    assert stream.getvalue().split("\r")[2] == (
        "[########################] 100%  objects 1/1  records 1  requests 1  0.417 records/s  2 s\x1b[K"
    )
    totals = {"Objects": 1, "ObjectsFailed": 0, "Records": 1, "RecordsFailed": 0, "Requests": 1, "Retries": 0}
    totals |= {"BytesRead": 2, "BytesSent": 2, "BytesWritten": 4, "Seconds": 2.4, "RecordsPerSecond": 0.417}
    description = {
        "TransformJobName": "one",
        "TransformJobStatus": "Completed",
        "TransformOutput": {"S3OutputPath": "/out"},
        "LocalRun": {"Summary": totals},
    }
    assert "  time      2.4 s, 0.417 records/s" in progress.render_summary(description).splitlines()
