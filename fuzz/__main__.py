"""python -m fuzz list | seed T | run T [--seconds S] [--runs N] | merge T | replay T [--coverage] [FILE...]
| campaign T [--seconds S] [--runs N]

`campaign` is what scripts/fuzz.sh runs for each target: seed (an empty corpus), run, merge, replay with coverage,
and one summary line (also appended to build/fuzz/summary.tsv); docs/operations.md, "Fuzzing", says how to read it.
"""

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from fuzz import targets

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "build" / "fuzz"  # a campaign's new inputs and findings; ignored by git
FINDING_PREFIX = "finding-"  # a corpus file kept through every merge: an input that once was a finding
RSS_LIMIT_MB = 2048


def _work(name: str) -> Path:
    folder = WORK / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _store(folder: Path, data: bytes) -> Path:
    """`data` in `folder` under its SHA-1, libFuzzer's naming (a second copy is the same file)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / hashlib.sha1(data).hexdigest()
    path.write_bytes(data)
    return path


def seed(name: str) -> int:
    """Writes the harness's `seeds()` (inputs taken from the tests) into its corpus; the number written."""
    harness = targets.load(name)
    written = [_store(targets.corpus(name), data) for data in getattr(harness, "seeds", list)()]
    print(f"{name}: {len(written)} seeds in {targets.corpus(name).relative_to(REPO)}")
    return 0


def _libfuzzer_args(name: str, harness: object, extra: list[str]) -> list[str]:
    work = _work(name)
    launcher = work / "launcher"  # libFuzzer's merge runs argv[0] again, so it must be a program
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m fuzz _libfuzzer {name} "$@"\n')
    launcher.chmod(0o755)
    max_len = getattr(harness, "MAX_LEN", targets.DEFAULT_MAX_LEN)
    timeout = getattr(harness, "TIMEOUT_S", targets.DEFAULT_TIMEOUT_S)
    return [
        str(launcher),
        f"-max_len={max_len}",
        f"-timeout={timeout}",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        f"-artifact_prefix={work}/",
        "-print_final_stats=1",
        *extra,
    ]


def _libfuzzer(name: str, args: list[str]) -> int:
    """libFuzzer in this process, on the instrumented harness (atheris: not needed for anything else)."""
    import atheris

    with atheris.instrument_imports(include=["sagemaker_tfs"]):
        harness = targets.load(name)
    atheris.Setup([str(_work(name) / "launcher"), *args], harness.one_input)
    atheris.Fuzz()  # exits the process
    return 0


def run(name: str, seconds: int, runs: int) -> int:
    """A campaign: new inputs go to build/fuzz/NAME/new, findings to build/fuzz/NAME/crash-* (and the like)."""
    harness = targets.load(name)
    new = _work(name) / "new"
    new.mkdir(exist_ok=True)
    limits = [f"-max_total_time={seconds}"] + ([f"-runs={runs}"] if runs else [])
    args = _libfuzzer_args(name, harness, limits)
    corpus = targets.corpus(name)
    corpus.mkdir(parents=True, exist_ok=True)
    log = _work(name) / "campaign.log"
    with log.open("wb") as out:  # libFuzzer writes to stderr: kept for the figures, and shown
        process = subprocess.Popen([*args, str(new), str(corpus)], stderr=subprocess.PIPE)
        assert process.stderr is not None
        for line in process.stderr:
            out.write(line)
            sys.stderr.buffer.write(line)
            sys.stderr.flush()
    return process.wait()


def merge(name: str) -> int:
    """Minimises the corpus with the campaign's new inputs (libFuzzer's -merge=1: the fewest inputs with all their
    coverage); files named finding-* stay whatever their coverage."""
    harness = targets.load(name)
    corpus, new = targets.corpus(name), _work(name) / "new"
    merged = _work(name) / "merged"
    shutil.rmtree(merged, ignore_errors=True)
    merged.mkdir()
    code = subprocess.call([*_libfuzzer_args(name, harness, ["-merge=1"]), str(merged), str(corpus), str(new)])
    if code != 0:
        return code
    kept = {path.name for path in merged.iterdir()}
    if not kept and targets.inputs(name):
        print(f"{name}: the merge kept nothing; the corpus is left as it was", file=sys.stderr)
        return 1
    for path in list(corpus.iterdir()):
        if not path.name.startswith(FINDING_PREFIX) and path.name not in kept:
            path.unlink()
    for path in merged.iterdir():
        shutil.copyfile(path, corpus / path.name)
    shutil.rmtree(new)
    print(f"{name}: {len(targets.inputs(name))} inputs in {corpus.relative_to(REPO)} after the merge")
    return 0


def replay(name: str, with_coverage: bool, files: list[Path] | None = None) -> int:
    """Every corpus input (or `files`: a finding) through the oracle, in this process, without atheris; with
    --coverage, the share of the target's MODULES' lines and branches they reach (coverage.py)."""
    measure = None
    if with_coverage:
        import coverage

        measure = coverage.Coverage(branch=True, data_file=None)
        measure.start()
    harness = targets.load(name)
    started = time.perf_counter()
    paths = files or targets.inputs(name)
    for path in paths:
        harness.one_input(path.read_bytes())
    took = time.perf_counter() - started
    print(f"{name}: {len(paths)} inputs replayed in {took:.2f} s, no finding")
    if measure is not None:
        measure.stop()
        sources = [str(sys.modules[module].__file__) for module in harness.MODULES]
        percent = measure.report(include=sources, show_missing=False, file=sys.stdout)
        print(f"{name}: coverage of {', '.join(harness.MODULES)}: {percent:.1f}%")
    return 0


FINDINGS = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")  # the names libFuzzer gives its artifacts


def campaign(name: str, seconds: int, runs: int) -> int:
    """seed (when the corpus is empty), run, merge, replay with coverage: one summary line; 1 on a finding."""
    if not targets.inputs(name):
        seed(name)
    started = time.monotonic()
    code = run(name, seconds, runs)
    took = time.monotonic() - started
    stats = dict(re.findall(r"^stat::(\w+): *(\d+)$", (_work(name) / "campaign.log").read_text("latin-1"), re.M))
    findings = sorted(path.name for path in _work(name).iterdir() if path.name.startswith(FINDINGS))
    if code == 0 and not findings:
        code = merge(name)
    replayed = subprocess.run(
        [sys.executable, "-m", "fuzz", "replay", name, "--coverage"], capture_output=True, text=True, check=False
    )
    sys.stdout.write(replayed.stdout)
    sys.stderr.write(replayed.stderr)
    cover = re.search(r"coverage of .*: ([0-9.]+)%", replayed.stdout)
    executions = int(stats.get("number_of_executed_units", 0))
    line = (
        f"{name}\t{executions} executions\t{took:.0f} s\t{executions / max(took, 1e-9):.0f}/s\t"
        f"{len(targets.inputs(name))} inputs\tcoverage {cover.group(1) if cover else '?'}%\t"
        f"findings {len(findings)}{': ' + ' '.join(findings) if findings else ''}"
        # libFuzzer stops without an artifact when the process dies outside the target (a crash in set-up)
        + (f"\tlibFuzzer exited with {code}" if code and not findings else "")
    )
    print(line)
    with (WORK / "summary.tsv").open("a") as summary:
        summary.write(line + "\n")
    return 1 if findings or code or replayed.returncode else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_libfuzzer"]:
        return _libfuzzer(argv[1], argv[2:])
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list")
    for command in ("seed", "merge"):
        commands.add_parser(command).add_argument("target")
    for command in ("run", "campaign"):
        fuzzing = commands.add_parser(command)
        fuzzing.add_argument("target")
        fuzzing.add_argument("--seconds", type=int, default=1800, help="stop after this long (default 30 minutes)")
        fuzzing.add_argument("--runs", type=int, default=0, help="stop after this many executions (0: no limit)")
    again = commands.add_parser("replay")
    again.add_argument("target")
    again.add_argument("--coverage", action="store_true")
    again.add_argument("files", nargs="*", type=Path, help="these inputs instead of the corpus (a finding)")
    options = parser.parse_args(argv)
    if options.command == "list":
        print("\n".join(targets.names()))
        return 0
    if options.command == "seed":
        return seed(options.target)
    if options.command == "run":
        return run(options.target, options.seconds, options.runs)
    if options.command == "campaign":
        return campaign(options.target, options.seconds, options.runs)
    if options.command == "merge":
        return merge(options.target)
    return replay(options.target, options.coverage, options.files)


if __name__ == "__main__":
    sys.exit(main())
