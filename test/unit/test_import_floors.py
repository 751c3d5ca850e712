"""The package's import floors (pyproject.toml's import-linter contract, docs/ARCHITECTURE.md): no module imports
from a floor above its own, and no import circle crosses floors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import paths


def test_no_module_imports_from_a_floor_above_its_own():
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [lint, "--config", paths.REPO / "pyproject.toml", "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=paths.REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(paths.REPO / "container")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "floors KEPT" in result.stdout
