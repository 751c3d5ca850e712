"""Acceptance: `sagemaker-tfs tune transform` against real stacks of half_plus_three (no mocks), with a tiny budget
and a small CSV input: the outputs exist and are well formed; no speed is asserted (the machine running the suite is
busy). Then each error it reports in one message with exit status 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import paths
import pytest
from sagemaker_tfs.config import VARIABLES

NAMES = {variable.name for variable in VARIABLES.values()}
CSV = ("--content-type", "text/csv", "--accept", "text/csv", "--split-type", "Line", "--assemble-with", "Line")


def tune(*args: str | Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    command = [str(paths.VENV_BIN / "sagemaker-tfs"), "tune", "transform", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def csv_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two CSV objects of one number per line (half_plus_three answers 0.5x + 3 for each)."""
    folder = tmp_path_factory.mktemp("input")
    (folder / "a.csv").write_text("".join(f"{v}.5\n" for v in range(50)))
    (folder / "b.csv").write_text("".join(f"{v}\n" for v in range(400)))
    return folder


def test_a_short_tune_writes_the_table_the_request_and_the_report(csv_input: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = tune(paths.HALF_PLUS_THREE, "--data", csv_input, *CSV, "--sample", "300", "--budget", "40s", "--out", out)
    assert result.returncode == 0, result.stderr
    # the table: a header and a row per setting, the defaults first; the winner starred
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:3] == ["#", "setting", "records/s"])
    rows = [line for line in lines[header + 1 :] if line[:1].isdigit()]
    assert rows and rows[0].split()[0].rstrip("*") == "1" and "defaults" in rows[0]
    assert sum(row.split()[0].endswith("*") for row in rows) == 1
    assert (out / "table.txt").read_text().strip() == "\n".join(lines[header : header + 1 + len(rows)]).strip()
    # the winner as CreateTransformJob's request, as `transform --print-request` prints it
    request = json.loads((out / "request.json").read_text())
    assert isinstance(request["MaxConcurrentTransforms"], int) and request["MaxConcurrentTransforms"] >= 1
    assert request["BatchStrategy"] in ("MultiRecord", "SingleRecord")
    assert isinstance(request["MaxPayloadInMB"], int)
    assert request["TransformInput"]["DataSource"]["S3DataSource"]["S3Uri"] == str(csv_input)
    assert request["TransformInput"]["SplitType"] == "Line" and request["TransformOutput"]["Accept"] == "text/csv"
    environment = request["Environment"]
    assert environment and set(environment) <= NAMES and all(isinstance(v, str) for v in environment.values())
    pairs = (out / "environment.env").read_text().splitlines()
    assert dict(line.split("=", 1) for line in pairs) == environment
    # the request is one `transform` accepts as it is
    dry = subprocess.run(
        [str(paths.VENV_BIN / "sagemaker-tfs"), "transform", "--model", paths.HALF_PLUS_THREE, "--request"]
        + [str(out / "request.json"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0 and json.loads(dry.stdout) == request, dry.stderr
    # the page: records/s per setting, the winner marked
    page = (out / "report.html").read_text()
    assert "<svg" in page and 'class="winner"' in page and "Winner: #" in page and "records/s" in page
    results = json.loads((out / "results.json").read_text())
    assert results["winner"] is not None and results["trials"][0]["setting"] == "defaults"
    assert results["trials"][0]["measured"]["records"] == 300 and results["trials"][0]["records_per_s"] > 0
    # the progress line, the winner, the estimate naming the machine
    assert "tune: setting 1 of" in result.stderr
    assert "winner: #" in result.stdout
    estimate = next(line for line in lines if line.startswith("estimate: "))
    assert "(2 objects, " in estimate and " records) takes " in estimate and " per instance " in estimate
    assert " cores, " in estimate and "GB memory" in estimate and "GPU" in estimate


def test_a_sample_the_model_fails_on_stops_naming_the_failure(tmp_path: Path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "bad.jsonl").write_text('"not a number"\n"nor this"\n')
    result = tune(
        paths.HALF_PLUS_THREE,
        "--data",
        tmp_path / "data",
        "--content-type",
        "application/jsonlines",
        "--split-type",
        "Line",
        "--budget",
        "60s",
        "--out",
        tmp_path / "out",
    )
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    assert "error: The model failed on the sample with the default settings: ClientError" in message, message
    assert "bad.jsonl: " in message


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp, data: [tmp / "missing", "--data", data], "does not exist"),
        (lambda tmp, data: [tmp, "--data", data], "no SavedModel"),
        (lambda tmp, data: [paths.HALF_PLUS_THREE], "no data"),
        (lambda tmp, data: [paths.HALF_PLUS_THREE, "--data", tmp / "nothing-here"], "No S3 objects found"),
        (lambda tmp, data: [paths.HALF_PLUS_THREE, "--data", data, "--split-type", "Lines"], "splitType"),
        (lambda tmp, data: [paths.HALF_PLUS_THREE, "--data", data, "--budget", "5s"], "budget too small"),
    ],
    ids=["no model", "bad model dir", "no data", "empty input", "invalid job", "budget too small"],
)
def test_errors_are_one_message_and_status_2(csv_input: Path, tmp_path: Path, make, expected: str):
    (tmp_path / "model").mkdir()
    args = make(tmp_path / "model", csv_input)
    args += [] if "--budget" in args else ["--budget", "30s"]
    result = tune(*args, "--out", tmp_path / "out", timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and expected in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()
