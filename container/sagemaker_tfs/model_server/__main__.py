"""`tfs-model-server` / `python -m sagemaker_tfs.model_server`: the command line entry point."""

from __future__ import annotations

import logging
import sys

from .flags import FlagError, parse, usage


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if any(a in ("--help", "-help", "-h", "--helpfull") for a in args):
        sys.stdout.write(usage())
        return 0
    try:
        flags = parse(args)
    except FlagError as exc:
        sys.stderr.write(f"tfs-model-server: {exc}\n{usage()}")
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s.%(msecs)03d %(levelname).1s %(name)s] %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S")
    from .servable import quiet_tensorflow_logs

    quiet_tensorflow_logs()
    from .server import run  # imports TensorFlow: only once the command line is known to be good

    return run(flags)


if __name__ == "__main__":
    sys.exit(main())
