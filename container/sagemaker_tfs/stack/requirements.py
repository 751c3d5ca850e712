"""Installing code/requirements.txt at start-up, the container's own packages pinned so that a requirement cannot
replace them, and the packages the container itself provides (the inference toolkit's `sagemaker-inference`,
whose import names are this container's `sagemaker_inference`) left out.

Into the environment itself when serve's user may write it, else (a read-only image, a non-root user) into
<runtime folder>/python-packages, which the gunicorn workers get on their PYTHONPATH. pip keeps no cache: $HOME
may not be writable, and each start installs once."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import sys
import sysconfig
from pathlib import Path

from ..shared import runtime_dir

log = logging.getLogger("serve")

# Packages whose import names the container provides: installing them would replace ours.
PROVIDED = {"sagemaker-inference": "the container's sagemaker_inference package"}
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_INCLUDE = re.compile(r"(\s*(?:-r|--requirement|-c|--constraint)(?:\s+|=))(\S+)(.*)")

# Packages the container itself runs on: user requirements may not change their versions.
PINNED_PACKAGES = (
    "tensorflow",
    "tensorflow-serving-api",
    "numpy",
    "protobuf",
    "grpcio",
    "falcon",
    "gunicorn",
    "requests",
    "urllib3",
    "uvloop",
    "httptools",
)


PACKAGES_FOLDER = "python-packages"


def target_folder(runtime: Path) -> Path | None:
    """Where requirements go when the environment's site-packages is not writable; None when it is."""
    if os.access(sysconfig.get_paths()["purelib"], os.W_OK):
        return None
    return runtime / PACKAGES_FOLDER


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
    target = target_folder(runtime)
    where = []
    if target is not None:
        runtime_dir.fresh_folder(target)
        where = ["--target", str(target)]
    log.info(
        "installing %s into %s (the container's own packages are pinned by %s)",
        requirements,
        target or "the environment",
        constraints,
    )
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--no-cache-dir",
        *where,
        "-r",
        str(requirements_for_pip(requirements, runtime)),
        "-c",
        str(constraints),
    ]


def worker_env(runtime: Path, env: dict[str, str]) -> dict[str, str]:
    """The gunicorn workers' environment: with the requirements' folder first on PYTHONPATH when they go there
    (also before it exists: with SAGEMAKER_RELOAD, a requirements.txt saved later fills it for the next workers)."""
    target = target_folder(runtime)
    if target is None:
        return env
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(target), env.get("PYTHONPATH")]))}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements_for_pip(requirements: Path, runtime: Path) -> Path:
    """`requirements` itself, or, when it names a PROVIDED package, a copy in the runtime folder without those
    lines (logged; its nested -r/-c files made absolute, since they are relative to the original's folder)."""
    kept, dropped = [], []
    for line in requirements.read_text().splitlines():
        match = _NAME.match(line)
        if match and not line.lstrip().startswith("-") and _canonical(match.group(1)) in PROVIDED:
            dropped.append((line.strip(), _canonical(match.group(1))))
            continue
        include = _INCLUDE.match(line)
        if include and not Path(include.group(2)).is_absolute() and "://" not in include.group(2):
            line = f"{include.group(1)}{requirements.parent / include.group(2)}{include.group(3)}"
        kept.append(line)
    if not dropped:
        return requirements
    for line, name in dropped:
        log.info("%s: %r is satisfied by %s, not installed", requirements, line, PROVIDED[name])
    copy = runtime / "requirements.txt"
    runtime_dir.write_file(copy, "\n".join(kept) + "\n")
    return copy
