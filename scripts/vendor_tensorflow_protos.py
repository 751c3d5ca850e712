"""Copy into tensorflow-protos/ the modules of TensorFlow that tensorflow-serving-api's protos import.

tensorflow-serving-api's generated modules import TensorFlow's own generated protos
(`from tensorflow.core.framework import tensor_pb2`, ...): 35 small files, pure protobuf. The serving image
installs them from tensorflow-protos/ instead of the whole TensorFlow package. Run this with the full
environment (tensorflow and tensorflow-serving-api installed) after changing their version:

    .venv/bin/python scripts/vendor_tensorflow_protos.py

test/unit/test_tensorflow_protos.py fails while the copy differs from the installed TensorFlow.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENDORED = REPO / "tensorflow-protos"
IMPORT = re.compile(r"^from (tensorflow[\w.]*) import (\w+)", re.M)


def site_root(package: str) -> Path:
    """The folder that holds `package` (site-packages)."""
    return Path(importlib.util.find_spec(package).submodule_search_locations[0]).parent


def needed_files() -> list[str]:
    """Paths (relative to site-packages) of the TensorFlow modules that tensorflow_serving's protos import,
    transitively, with the `__init__.py` of each of their packages below `tensorflow/` (not `tensorflow/__init__.py`,
    which is TensorFlow itself)."""
    serving = site_root("tensorflow_serving")
    todo = [p.relative_to(serving) for p in (serving / "tensorflow_serving").rglob("*_pb2*.py")]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        root = serving if path.parts[0] == "tensorflow_serving" else site_root("tensorflow")
        for package, module in IMPORT.findall((root / path).read_text()):
            todo.append(Path(*package.split("."), f"{module}.py"))
    modules = {path for path in seen if path.parts[0] == "tensorflow"}
    packages = {Path(*path.parts[:i], "__init__.py") for path in modules for i in range(2, len(path.parts))}
    return sorted(str(path) for path in modules | packages)


def main() -> int:
    source = site_root("tensorflow")
    files = needed_files()
    shutil.rmtree(VENDORED / "tensorflow", ignore_errors=True)
    for name in files:
        target = VENDORED / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target)
    version = importlib.metadata.version("tensorflow")
    print(
        f'copied {len(files)} files of tensorflow {version} to {VENDORED}; set version = "{version}" '
        f"in {VENDORED / 'pyproject.toml'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
