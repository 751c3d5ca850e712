"""`tfs-model-server`, `sagemaker-tfs model-server`, `python -m sagemaker_tfs.model_server`: the command line."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys

from ..shared import logs
from .flags import FlagError, parse, usage


def main(argv: list[str] | None = None, prog: str = "tfs-model-server") -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("--help", "-help", "-h", "--helpfull") for a in args):
        sys.stdout.write(usage(prog))
        return 0
    try:
        flags = parse(args)
    except FlagError as exc:
        sys.stderr.write(f"{prog}: {exc}\n{usage(prog)}")
        return 2
    if flags.version:
        sys.stdout.write(version_text())
        return 0
    handler = logging.StreamHandler(sys.stderr)
    text_layout = "%(asctime)s.%(msecs)03d %(levelname).1s %(name)s] %(message)s"
    # JSON when `serve` runs with SAGEMAKER_LOG_FORMAT=json
    handler.setFormatter(logs.formatter(logs.format_from_env(), text_layout, "%Y-%m-%d %H:%M:%S"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    logs.quiet_tensorflow()
    skip_keras()
    from .server import run  # imports TensorFlow: only once the command line is known to be good

    return run(flags)


def skip_keras() -> None:
    """TensorFlow imports Keras eagerly (and Keras imports scikit-learn when it is installed): over half of
    TensorFlow's import time, which a restarted model server pays again before it serves. The model server never
    uses Keras (SavedModels run as graphs in a session), so, unless the tf_keras package is there, it sets
    TF_USE_LEGACY_KERAS=1, which points that eager import at tf_keras, and TensorFlow skips it as not installed."""
    if "TF_USE_LEGACY_KERAS" not in os.environ and importlib.util.find_spec("tf_keras") is None:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"


def version_text() -> str:
    """--version, in TFS's two lines: this server's version (and the TFS API it implements), TensorFlow's."""
    from importlib import metadata

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "unknown"

    return (
        f"TensorFlow ModelServer: {version('sagemaker-tfs')} (sagemaker-tfs embedded model server, "
        f"tensorflow-serving-api {version('tensorflow-serving-api')})\n"
        f"TensorFlow Library: {version('tensorflow')}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
