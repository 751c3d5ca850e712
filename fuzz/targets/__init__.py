"""The harnesses, one module each (fuzz/__init__.py says what a module holds)."""

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

CORPORA = Path(__file__).resolve().parents[1] / "corpus"
DEFAULT_MAX_LEN = 4096
DEFAULT_TIMEOUT_S = 10


def names() -> list[str]:
    """Every harness's name, sorted."""
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def load(name: str) -> ModuleType:
    """The harness `name`; ValueError naming the known ones for any other."""
    if name not in names():
        raise ValueError(f"no fuzz target {name!r}: the targets are {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{name}")


def corpus(name: str) -> Path:
    """The folder of the target's corpus in the repository."""
    return CORPORA / name


def inputs(name: str) -> list[Path]:
    """The corpus's files, sorted by name (the replay's order)."""
    folder = corpus(name)
    return sorted(path for path in folder.iterdir() if path.is_file()) if folder.is_dir() else []
