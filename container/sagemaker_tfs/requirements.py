"""Installing code/requirements.txt at start-up, the container's own packages pinned so that a requirement cannot
replace them."""

from __future__ import annotations

import importlib.metadata
import logging
import sys
from pathlib import Path

from . import runtime_dir

log = logging.getLogger("serve")

# Packages the container itself runs on: user requirements may not change their versions.
PINNED_PACKAGES = ("tensorflow", "tensorflow-serving-api", "numpy", "protobuf", "grpcio", "falcon", "gunicorn",
                   "requests", "urllib3", "uvloop", "httptools")


def pip_command(code: Path, runtime: Path) -> list[str] | None:
    """`pip install -r <code>/requirements.txt` with the constraints file written in the runtime folder; None when
    there is nothing to install (no requirements.txt, or <code>/lib exists: then it is not installed, as in the
    original)."""
    requirements = code / "requirements.txt"
    if (code / "lib").is_dir():
        if requirements.is_file():
            log.warning("%s/lib exists: its modules are used and %s is not installed", code, requirements)
        return None
    if not requirements.is_file():
        return None
    constraints = runtime / "constraints.txt"
    pins = []
    for name in PINNED_PACKAGES:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    runtime_dir.write_file(constraints, "\n".join(pins) + "\n")
    log.info("installing %s (the container's own packages are pinned by %s)", requirements, constraints)
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
            "-r", str(requirements), "-c", str(constraints)]
