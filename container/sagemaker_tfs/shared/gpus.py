"""The GPUs of the machine, for the model servers' memory shares and the toolkit's gpu_id."""

from __future__ import annotations

import shutil
import subprocess


def gpu_count() -> int:
    """GPUs listed by `nvidia-smi -L` (0 without nvidia-smi)."""
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))
