"""Find and validate the SavedModels in the model directory; render the model server's config files.

Two layouts are served, also side by side:
  <model_dir>/<version>/saved_model.pb          one model, named after the model directory
                                                (`tar -czvf model.tar.gz 1538687370 code` makes it)
  <model_dir>/<name>/<version>/saved_model.pb   one model per <name>
A version folder's name is a number in ASCII digits (leading zeros allowed, as in TensorFlow Serving; the rule is
version_folders.py, shared with the model server and package-model). Hidden folders and `code/` are not models.
Every version found is served; a request without a version gets the highest.
Anything that would make the model server fail later, or silently serve something else than meant (a
SavedModel outside a numbered version folder, inference.py outside code/), is refused here with one message
that says what to fix.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from .version_folders import is_version_name, parse_version, why_not_a_version

log = logging.getLogger(__name__)

SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
LAYOUT_HELP = (
    "expected <model_dir>/<version>/saved_model.pb or <model_dir>/<model name>/<version>/saved_model.pb, "
    "where <version> is a number such as 1"
)


class ModelTreeError(ValueError):
    """The model directory cannot be served; the message says what to fix."""


@dataclass(frozen=True)
class Model:
    name: str
    base_path: Path
    versions: tuple[int, ...]  # ascending


@dataclass(frozen=True)
class ModelTree:
    model_dir: Path
    models: tuple[Model, ...]
    default_model: str | None  # None without SavedModels
    script: Path | None  # code/<SAGEMAKER_PROGRAM>, when present

    @property
    def names(self) -> list[str]:
        return [model.name for model in self.models]


def _has_saved_model(folder: Path) -> bool:
    return any((folder / f).is_file() for f in SAVED_MODEL_FILES)


def _is_candidate(entry: os.DirEntry | Path) -> bool:
    return entry.is_dir() and not entry.name.startswith(".") and entry.name != "code"


def _versions(base: Path) -> tuple[int, ...]:
    """The version folders of a model base path, each checked to hold a SavedModel."""
    versions: dict[int, str] = {}
    for child in sorted(base.iterdir()):
        version = parse_version(child.name)
        if version is None or not child.is_dir():
            continue
        if not _has_saved_model(child):
            contents = ", ".join(sorted(p.name for p in child.iterdir())[:8]) or "nothing"
            raise ModelTreeError(
                f"version folder {child} has no saved_model.pb (it holds {contents}); "
                "a version folder must contain a SavedModel as written by tf.saved_model.save"
            )
        if version in versions:
            raise ModelTreeError(
                f"version folders {base / versions[version]} and {child} are the same version {version}; keep one"
            )
        versions[version] = child.name
    return tuple(sorted(versions))


def _misplaced_saved_models(model_dir: Path) -> list[Path]:
    """saved_model.pb files that no version folder holds: the most common packaging mistake."""
    found = []
    for root, dirs, files in os.walk(model_dir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        rel = Path(root).relative_to(model_dir)
        if any(f in files for f in SAVED_MODEL_FILES):
            parts = rel.parts
            good = (len(parts) == 1 and is_version_name(parts[0])) or (
                len(parts) == 2 and is_version_name(parts[1]) and parts[0] != "code"
            )
            if not good:
                found.append(Path(root) / "saved_model.pb")
    return found


def _misplaced_scripts(model_dir: Path, program: str) -> list[str]:
    """Handler scripts (`program`, inference.py) outside <model_dir>/code (and its lib folder)."""
    found = []
    code = model_dir / "code"
    for root, dirs, files in os.walk(model_dir):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        here = Path(root)
        if program in files and here != code and not here.is_relative_to(code / "lib"):
            found.append(str(here / "inference.py"))
    return found


def find_models(
    model_dir: str | Path,
    default_model: str | None = None,
    program: str = "inference.py",
    allow_no_model: Callable[[Path], bool] = lambda script: False,
) -> ModelTree:
    """Walk the model directory; raise ModelTreeError with a clear message when nothing can be served.
    `program` is the handler script's name in code/; a directory without SavedModels is valid when
    `allow_no_model(script)` says so (an inference toolkit script, whose model_fn loads the model)."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise ModelTreeError(f"model directory {model_dir} does not exist (set SAGEMAKER_MODEL_DIR, or mount one)")

    models: list[Model] = []
    root_versions = _versions(model_dir)
    if root_versions:
        models.append(Model(model_dir.name, model_dir, root_versions))
    for child in sorted(model_dir.iterdir()):
        if _is_candidate(child) and not is_version_name(child.name):
            versions = _versions(child)
            if versions:
                models.append(Model(child.name, child, versions))

    misplaced = _misplaced_saved_models(model_dir)
    if misplaced:
        what = "found SavedModels" if models else "no SavedModel found in a version folder; found"
        hints = {
            hint
            for path in misplaced
            for part in path.relative_to(model_dir).parts
            if (hint := why_not_a_version(part))
        }  # a folder that looks like a version but is not one
        raise ModelTreeError(
            f"{what} outside a version folder in {model_dir}: {', '.join(map(str, misplaced))}; "
            f"{LAYOUT_HELP}" + "".join(f"; {hint}" for hint in sorted(hints))
        )
    script = model_dir / "code" / program
    if not models:
        if script.is_file() and allow_no_model(script):
            log.info("no SavedModel in %s: %s loads the model, no model server is started", model_dir, script)
            return ModelTree(model_dir, (), None, script)
        raise ModelTreeError(f"no SavedModel found in {model_dir}: {LAYOUT_HELP}")

    names = [m.name for m in models]
    if len(set(names)) != len(names):
        raise ModelTreeError(f"two models are named {model_dir.name!r} in {model_dir}; rename the folder")
    if default_model is not None and default_model not in names:
        raise ModelTreeError(
            f"SAGEMAKER_TFS_DEFAULT_MODEL_NAME={default_model!r} is not a model in {model_dir}; "
            f"found: {', '.join(names)}"
        )
    stray = _misplaced_scripts(model_dir, program)
    if stray and not script.is_file():
        raise ModelTreeError(
            f"found {', '.join(stray)}, but the handler script must be {script} "
            "(a code/ folder next to the version folders); move it there"
        )
    for path in stray:
        log.warning("ignoring %s: only %s is used as the handler script", path, script)
    return ModelTree(model_dir, tuple(models), default_model or names[0], script if script.is_file() else None)


def model_config_text(tree: ModelTree) -> str:
    """The model server's --model_config_file: every model, every version found (specific policy)."""
    config = model_server_config_pb2.ModelServerConfig()
    for model in tree.models:
        entry = config.model_config_list.config.add()
        entry.name = model.name
        entry.base_path = str(model.base_path.resolve())
        entry.model_platform = "tensorflow"
        entry.model_version_policy.specific.versions.extend(model.versions)
    return text_format.MessageToString(config)
