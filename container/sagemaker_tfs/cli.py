"""`sagemaker-tfs COMMAND [ARGUMENTS]`: the package's commands under one name.

Each command runs its module's entry point with the arguments that follow it, unchanged, under the name
`sagemaker-tfs COMMAND` (in its help and its messages). A command's module is imported only when that command
runs: importing this one imports nothing heavy (the image's `serve` has no TensorFlow).
`serve` and `tfs-model-server` stay commands of their own: SageMaker runs `docker run IMAGE serve`, and
`tfs-model-server` stands in for `tensorflow_model_server`. `transform` and `package-model`, first commands of their
own, stay one release as deprecated aliases (transform_alias, package_model_alias).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NamedTuple

PROG = "sagemaker-tfs"


def _serve(args: list[str]) -> int:
    from . import serve

    return serve.main(args)


def _model_server(args: list[str]) -> int:
    from .stack import extras

    missing = extras.missing("model-server")
    if missing:  # the serving image: its model server is tensorflow_model_server
        print(
            f"{PROG} model-server: the embedded model server is not installed (missing {', '.join(missing)}); "
            "install the model-server extra (pip install 'sagemaker-tfs[model-server]'), or run "
            "tensorflow_model_server",
            file=sys.stderr,
        )
        return 1
    from .model_server.__main__ import main

    return main(args, prog=f"{PROG} model-server")


def _transform(args: list[str], prog: str = f"{PROG} transform") -> int:
    from .transform.cli import main

    return main(args, prog)


def _tune(args: list[str]) -> int:
    from .tune.cli import main

    return main(args, f"{PROG} tune")


def _package_model(args: list[str], prog: str = f"{PROG} package-model") -> int:
    from .packaging import main

    return main(args, prog)


class Command(NamedTuple):
    summary: str  # the one line of `sagemaker-tfs --help`
    run: Callable[[list[str]], int]


COMMANDS = {
    "serve": Command("start the serving stack (model servers, gunicorn, nginx): the image's entrypoint", _serve),
    "model-server": Command("run the embedded model server, a stand-in for tensorflow_model_server", _model_server),
    "transform": Command("run a SageMaker Batch Transform job locally", _transform),
    "package-model": Command("build a model.tar.gz in the layout the container serves, or check one", _package_model),
    "tune": Command("measure settings on this machine and recommend the fastest (endpoint, transform)", _tune),
}


def usage() -> str:
    return f"usage: {PROG} [-h] [--version] COMMAND [ARGUMENTS ...]"


def help_text() -> str:
    width = max(map(len, COMMANDS)) + 2
    lines = [
        usage(),
        "",
        f"The commands of {PROG}, a TensorFlow Serving container for Amazon SageMaker's hosting contract.",
        "",
        "commands:",
    ]
    lines += [f"  {name:<{width}} {command.summary}" for name, command in COMMANDS.items()]
    lines += [
        "",
        "options:",
        f"  {'-h, --help':<{width}} show this help and exit",
        f"  {'--version':<{width}} show the version and the commit it was built from, and exit",
        "",
        f"A command's own help: {PROG} COMMAND --help. `serve` and `tfs-model-server` are also commands of their own.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        sys.stderr.write(f"{usage()}\n{PROG}: error: a command is required: {', '.join(COMMANDS)}\n")
        return 2
    first, rest = args[0], args[1:]
    if first in ("-h", "--help"):
        sys.stdout.write(help_text())
        return 0
    if first == "--version":
        from .shared import build_info  # (a command's modules are imported when it runs, this one too)

        print(f"{PROG} {build_info.describe()}")
        return 0
    command = COMMANDS.get(first)
    if command is None:
        sys.stderr.write(
            f"{usage()}\n{PROG}: error: unknown command {first!r}: choose from {', '.join(COMMANDS)} ({PROG} --help)\n"
        )
        return 2
    return command.run(rest)


def _deprecated(name: str) -> None:
    print(f"{name}: deprecated: use `{PROG} {name}` (`{name}` is removed in the next release)", file=sys.stderr)


def transform_alias() -> int:
    """The former `transform` command, deprecated: one line on stderr, then as before, its name in its messages."""
    _deprecated("transform")
    return _transform(sys.argv[1:], "transform")


def package_model_alias() -> int:
    """The former `package-model` command, deprecated: one line on stderr, then as before."""
    _deprecated("package-model")
    return _package_model(sys.argv[1:], "package-model")


if __name__ == "__main__":
    sys.exit(main())
