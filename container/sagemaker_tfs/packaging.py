"""`sagemaker-tfs package-model`: build a model.tar.gz in the layout the container serves, and check one before
deploying.

  sagemaker-tfs package-model build EXPORT_DIR [--code CODE_DIR] -o model.tar.gz
      EXPORT_DIR holds numbered version folders (<export>/1/saved_model.pb), or one folder per model
      (<export>/<name>/1/saved_model.pb). The archive gets them at its root, next to code/.
  sagemaker-tfs package-model check model.tar.gz | MODEL_DIR
      Applies the rules `serve` applies (model_tree.py), plus: code/inference.py compiles and defines
      handler(data, context) or both input_handler and output_handler, or inference toolkit functions
      (model_fn, input_fn, predict_fn, output_fn, transform_fn; then a SavedModel is optional);
      code/requirements.txt parses.
Both refuse a wrong layout with a message that says what to fix, and exit with status 1.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from .shared.handler_contract import (
    HOW_TO_FIX,
    Contract,
    IncompleteContract,
    MixedContracts,
    UncompilableScript,
    detect,
    ignored,
    is_toolkit_script,
)
from .shared.handler_contract import script_names as names_in
from .shared.model_archives import UNPACK_ERRORS, member_filter
from .shared.model_tree import ModelTree, ModelTreeError, find_models
from .toolkit.functions import TRANSFORM_CONFLICT


class PackagingError(ValueError):
    """The model or archive is not servable; the message says what to fix."""


def script_names(script: Path) -> set[str]:
    """handler_contract.script_names, its error as a PackagingError."""
    try:
        return names_in(script)
    except UncompilableScript as exc:
        raise PackagingError(str(exc)) from None


def handler_contract(script: Path, choice: str = "auto") -> Contract:
    """The script's contract, from its top-level names, without running it."""
    names = script_names(script)
    try:
        contract = detect(names, choice)
    except MixedContracts as exc:
        raise PackagingError(f"{script} {exc}") from None
    except IncompleteContract as exc:
        found = " and ".join(exc.present) or "none of the handler functions"
        raise PackagingError(f"{script} defines {found}: {HOW_TO_FIX}") from None
    if contract is Contract.TOOLKIT and "transform_fn" in names and {"input_fn", "predict_fn", "output_fn"} & names:
        raise PackagingError(f"{script}: {TRANSFORM_CONFLICT}")
    return contract


def _describe(script: Path) -> str:
    contract = handler_contract(script)
    if contract is Contract.TOOLKIT:
        return f"{contract.value}: {', '.join(ignored(script_names(script), Contract.HANDLER))}"
    return contract.value


def check_requirements(requirements: Path) -> list[str]:
    """The requirement lines (options, paths and URLs are passed to pip as they are)."""
    from packaging.requirements import InvalidRequirement, Requirement

    lines = []
    for number, raw in enumerate(requirements.read_text().splitlines(), start=1):
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if not line.startswith(("-", ".", "/", "git+", "http:", "https:", "file:")):
            try:
                Requirement(line)
            except InvalidRequirement as exc:
                raise PackagingError(f"{requirements} line {number} is not a requirement: {line!r} ({exc})") from None
        lines.append(line)
    return lines


def check_model_dir(model_dir: Path) -> list[str]:
    """Check an unpacked model folder; returns a summary, one line per finding."""
    try:
        tree: ModelTree = find_models(model_dir, allow_no_model=is_toolkit_script)
    except ModelTreeError as exc:
        raise PackagingError(str(exc)) from None
    summary = [f"model {m.name}: version(s) {', '.join(map(str, m.versions))}" for m in tree.models] or [
        "no SavedModel: the script's model_fn loads the model, no model server is started"
    ]
    code = model_dir / "code"
    if tree.script:
        summary.append(f"code/inference.py: {_describe(tree.script)}")
    elif code.is_dir():
        summary.append("code/: no inference.py, the default handler serves JSON, JSON lines and CSV")
    requirements = code / "requirements.txt"
    if requirements.is_file():
        lines = check_requirements(requirements)
        if (code / "lib").is_dir():
            summary.append(f"code/lib: on the path; code/requirements.txt ({len(lines)} lines) will NOT be installed")
        else:
            summary.append(f"code/requirements.txt: {len(lines)} requirement(s) installed at start-up")
    elif (code / "lib").is_dir():
        summary.append("code/lib: on the path")
    return summary


def _safe_members(archive: tarfile.TarFile) -> list[tarfile.TarInfo]:
    members = archive.getmembers()
    for member in members:
        path = Path(member.name)
        if path.is_absolute() or ".." in path.parts:
            raise PackagingError(f"archive member {member.name!r} points outside the model directory")
        if member.issym() or member.islnk():
            raise PackagingError(f"archive member {member.name!r} is a link; store the file itself")
    return members


def check(target: Path) -> list[str]:
    """Check a model.tar.gz or an unpacked model folder."""
    if target.is_dir():
        return check_model_dir(target)
    if not target.is_file():
        raise PackagingError(f"{target} does not exist")
    with tempfile.TemporaryDirectory(prefix="model-check-") as tmp:
        model_dir = Path(tmp) / "model"  # the name SageMaker unpacks to (/opt/ml/model)
        try:
            with tarfile.open(target, "r:*") as archive:
                archive.extractall(model_dir, members=_safe_members(archive), filter=member_filter)
        except PackagingError:
            raise
        except UNPACK_ERRORS as exc:
            raise PackagingError(f"{target} is not a readable tar archive: {exc}") from None
        return check_model_dir(model_dir)


def build(export_dir: Path, output: Path, code_dir: Path | None = None) -> list[str]:
    """Write output (model.tar.gz) from an export folder and an optional code folder; returns the check summary."""
    if not export_dir.is_dir():
        raise PackagingError(f"export folder {export_dir} does not exist")
    if code_dir is not None and not code_dir.is_dir():
        raise PackagingError(f"code folder {code_dir} does not exist")
    with tempfile.TemporaryDirectory(prefix="model-build-") as tmp:
        stage = Path(tmp) / "model"
        shutil.copytree(export_dir, stage, ignore=shutil.ignore_patterns(".*", "__pycache__"))
        if code_dir is not None:
            if (stage / "code").exists():
                raise PackagingError(f"{export_dir} already has a code/ folder; pass it once")
            shutil.copytree(code_dir, stage / "code", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        summary = check_model_dir(stage)
        output.parent.mkdir(parents=True, exist_ok=True)
        partial = output.with_name(output.name + ".partial")
        with tarfile.open(partial, "w:gz") as archive:
            for child in sorted(stage.iterdir()):
                archive.add(child, arcname=child.name)
        partial.replace(output)
    return summary


def main(argv: list[str] | None = None, prog: str = "sagemaker-tfs package-model") -> int:
    """The command; `prog` names it in the help and in its messages (the deprecated `package-model` alias:
    "package-model")."""
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build_cmd = commands.add_parser("build", help="build model.tar.gz from an export folder and a code folder")
    build_cmd.add_argument("export_dir", type=Path, help="folder with numbered version folders (or model folders)")
    build_cmd.add_argument("--code", type=Path, help="folder with inference.py, requirements.txt, lib/")
    build_cmd.add_argument("-o", "--output", type=Path, default=Path("model.tar.gz"))
    check_cmd = commands.add_parser("check", help="check a model.tar.gz or a model folder")
    check_cmd.add_argument("target", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format=f"{prog}: warning: %(message)s")
    try:
        if args.command == "build":
            summary = build(args.export_dir, args.output, args.code)
            print(f"wrote {args.output}")
        else:
            summary = check(args.target)
            print(f"{args.target}: OK")
    except PackagingError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    for line in summary:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
