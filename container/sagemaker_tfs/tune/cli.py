"""`sagemaker-tfs tune MODE ...`: MODE is `endpoint` (real-time hosting) or `transform` (Batch Transform jobs); each
mode's module is imported when run."""

from __future__ import annotations

import sys

MODES = {
    "endpoint": "the container settings with the most requests/s under a p99 bound (CreateModel's Environment)",
    "transform": "the job's fields and container settings with the most records/s (CreateTransformJob's request)",
}


def usage(prog: str) -> str:
    return f"usage: {prog} [-h] MODE [ARGUMENTS ...]"


def main(args: list[str], prog: str = "sagemaker-tfs tune") -> int:
    if not args or args[0] in ("-h", "--help"):
        lines = [usage(prog), "", "Measure settings on this machine and recommend the fastest.", "", "modes:"]
        lines += [f"  {name:<10} {summary}" for name, summary in MODES.items()]
        lines += ["", f"A mode's own help: {prog} MODE --help."]
        (sys.stdout if args else sys.stderr).write("\n".join(lines) + "\n")
        return 0 if args else 2
    mode, rest = args[0], args[1:]
    if mode == "endpoint":
        from .endpoint import main as endpoint

        return endpoint(rest, f"{prog} endpoint")
    if mode == "transform":
        from .transform_command import main as transform

        return transform(rest, f"{prog} transform")
    sys.stderr.write(f"{usage(prog)}\n{prog}: error: unknown mode {mode!r}: choose from {', '.join(MODES)}\n")
    return 2
