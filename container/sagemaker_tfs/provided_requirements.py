"""Requirements the container itself satisfies, kept out of `pip install -r code/requirements.txt`.

Scripts written for the SageMaker inference toolkit list `sagemaker-inference` in their requirements; here its
import names come from this container (the `sagemaker_inference` package, safe defaults), and installing the
toolkit's package would replace them. Such lines are dropped (logged) from a copy of the file that pip gets.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

log = logging.getLogger("serve")

PROVIDED = {"sagemaker-inference": "the container's sagemaker_inference package"}
_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_INCLUDE = re.compile(r"(\s*(?:-r|--requirement|-c|--constraint)(?:\s+|=))(\S+)(.*)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements_for_pip(requirements: Path, runtime_dir: Path) -> Path:
    """`requirements` itself, or, when it names a provided package, a copy in `runtime_dir` without those lines
    (nested -r/-c files made absolute, since they are relative to the original's folder)."""
    lines = requirements.read_text().splitlines()
    kept, dropped = [], []
    for line in lines:
        match = _NAME.match(line)
        if match and not line.lstrip().startswith("-") and _canonical(match.group(1)) in PROVIDED:
            dropped.append(line.strip())
            continue
        include = _INCLUDE.match(line)
        if include and not Path(include.group(2)).is_absolute() and "://" not in include.group(2):
            line = f"{include.group(1)}{requirements.parent / include.group(2)}{include.group(3)}"
        kept.append(line)
    if not dropped:
        return requirements
    for line in dropped:
        name = _canonical(_NAME.match(line).group(1))
        log.info("%s: %r is satisfied by %s, not installed", requirements, line, PROVIDED[name])
    copy = runtime_dir / "requirements.txt"
    copy.write_text("\n".join(kept) + "\n")
    return copy
