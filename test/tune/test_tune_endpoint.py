"""Acceptance: `sagemaker-tfs tune endpoint` against real stacks of half_plus_three (no mocks), with a tiny budget:
the outputs exist and are well formed; no speed is asserted (the machine running the suite is busy). Then each
error it reports in one message with exit status 2."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import paths
import pytest
from sagemaker_tfs.config import VARIABLES

NAMES = {variable.name for variable in VARIABLES.values()}
PAYLOAD = paths.REPO / "model_examples" / "half_plus_three" / "samples" / "instances.json"


def tune(*args: str | Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    command = [str(paths.VENV_BIN / "sagemaker-tfs"), "tune", "endpoint", *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def model_tar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """half_plus_three as SageMaker gets it: a model.tar.gz with the version folder at its root."""
    archive = tmp_path_factory.mktemp("model") / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for item in paths.HALF_PLUS_THREE.iterdir():
            tar.add(item, arcname=item.name)  # the version folder, 00000123
    return archive


def test_a_short_tune_writes_the_table_the_environment_and_the_report(model_tar: Path, tmp_path: Path):
    out = tmp_path / "out"
    result = tune(model_tar, "--payload", PAYLOAD, "--budget", "50s", "--step-seconds", "1", "--out", out)
    assert result.returncode == 0, result.stderr
    # the table: a header and a row per setting, the defaults first; the winner starred
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "setting"])
    rows = [line for line in lines[header + 1 :] if line[:1].isdigit()]
    assert rows and rows[0].split()[0].rstrip("*") == "1" and "defaults" in rows[0]
    assert sum(row.split()[0].endswith("*") for row in rows) == 1
    assert (out / "table.txt").read_text().strip() == "\n".join(lines[header : header + 1 + len(rows)]).strip()
    # the winner: CreateModel's Environment (strings, the container's variables) and the same as KEY=VALUE lines
    environment = json.loads((out / "environment.json").read_text())
    assert isinstance(environment, dict) and environment
    assert set(environment) <= NAMES and all(isinstance(v, str) for v in environment.values())
    assert all(name.startswith("SAGEMAKER_") for name in environment if name != "OMP_NUM_THREADS")
    pairs = (out / "environment.env").read_text().splitlines()
    assert dict(line.split("=", 1) for line in pairs) == environment
    # the page: the plot with the bound drawn and the winner marked
    page = (out / "report.html").read_text()
    assert "<svg" in page and 'class="bound"' in page and 'class="winner"' in page and "Winner: #" in page
    results = json.loads((out / "results.json").read_text())
    assert results["winner"] is not None and results["trials"][0]["setting"] == "defaults"
    assert results["trials"][0]["levels"] and results["context"]["ceiling"]["requests"] > 0
    # the progress line, the generator's own CPU, the winner's line
    assert "tune: setting 1 of" in result.stderr
    assert "load generator: " in result.stdout and " cores" in result.stdout
    assert "winner: #" in result.stdout


def test_a_payload_the_model_refuses_stops_with_its_status_and_body(tmp_path: Path):
    payload = tmp_path / "bad.json"
    payload.write_text("this is not JSON")
    result = tune(paths.HALF_PLUS_THREE, "--payload", payload, "--budget", "60s", "--out", tmp_path / "out")
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip().splitlines()[-1]
    assert "error: The model answered the payload bad.json with 4" in message, result.stderr


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp: ([tmp / "missing"], PAYLOAD), "does not exist"),
        (lambda tmp: ([tmp], PAYLOAD), "no SavedModel"),
        (lambda tmp: ([paths.HALF_PLUS_THREE], tmp / "missing.json"), "payload"),
    ],
    ids=["no model", "bad model dir", "unreadable payload"],
)
def test_errors_are_one_message_and_status_2(tmp_path: Path, make, expected: str):
    (model,), payload = make(tmp_path)
    result = tune(model, "--payload", payload, "--budget", "30s", "--out", tmp_path / "out", timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and expected in result.stderr, result.stderr


def test_a_budget_too_small_is_refused_before_anything_starts(tmp_path: Path):
    result = tune(paths.HALF_PLUS_THREE, "--payload", PAYLOAD, "--budget", "5s", "--out", tmp_path / "o", timeout=30)
    assert result.returncode == 2 and "budget too small" in result.stderr
    assert not (tmp_path / "o").exists()
