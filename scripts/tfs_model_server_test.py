"""Run TensorFlow Serving's own model server integration test against the embedded model server.

TFS's `tensorflow_serving/model_servers/tensorflow_model_server_test.py` (with its `test_util` base) starts
`$TEST_SRCDIR/tf_serving/tensorflow_serving/model_servers/tensorflow_model_server` with flags and checks it over
REST and gRPC. This script lays out such a TEST_SRCDIR with `tfs-model-server` as that binary and TFS's test
data, then runs the test as written (nothing of it is copied into this project):

    python scripts/tfs_model_server_test.py /path/to/tensorflow-serving   # a checkout or a bare git directory
    python scripts/tfs_model_server_test.py CHECKOUT -- TensorflowModelServerTest.testPrometheusEndpoint

It needs `portpicker` (pip) besides the project's packages. Expected to fail: the profiler service test and
test_tf_text (its model is not published), out of scope; with Keras 3, the two Keras tests, which fail against the
real server too (docs/tfs-compatibility.md, section 11).
"""

from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

TEST = "tensorflow_serving/model_servers/tensorflow_model_server_test.py"
NEEDED = ("tensorflow_serving/model_servers/", "tensorflow_serving/servables/tensorflow/testdata/")
REPO = Path(__file__).resolve().parent.parent


def export(source: Path, target: Path) -> None:
    """The test and its data from a checkout, or from a git directory (files whose content is absent skipped)."""
    if (source / "tensorflow_serving").is_dir():
        for prefix in NEEDED:
            subprocess.run(["cp", "-r", str(source / prefix), str(target / prefix)], check=True)
        return
    git = ["git", f"--git-dir={source}"]
    names = subprocess.run(
        [*git, "ls-tree", "-r", "--name-only", "HEAD", *NEEDED], check=True, capture_output=True, text=True
    ).stdout.split("\n")
    for name in filter(None, names):
        shown = subprocess.run([*git, "show", f"HEAD:{name}"], capture_output=True)
        if shown.returncode == 0:
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(shown.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a tensorflow/serving checkout or git directory")
    parser.add_argument("tests", nargs="*", help="test names (default: all)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfs-suite-") as tmp:
        srcdir = Path(tmp) / "srcdir"
        tree = srcdir / "tf_serving"
        (tree / "tensorflow_serving").mkdir(parents=True)
        for prefix in NEEDED:
            (tree / prefix).mkdir(parents=True, exist_ok=True)
        export(args.source.resolve(), tree)
        binary = tree / "tensorflow_serving/model_servers/tensorflow_model_server"
        binary.write_text(f'#!/bin/sh\nexec {sys.executable} -m sagemaker_tfs.model_server "$@"\n')
        binary.chmod(0o755)
        os.environ["TEST_SRCDIR"] = str(srcdir)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(REPO / "container"), os.environ.get("PYTHONPATH")])
        )
        import tensorflow_serving  # tensorflow-serving-api's package: the test's base module joins it

        tensorflow_serving.__path__.append(str(tree / "tensorflow_serving"))
        sys.argv = [TEST, f"--test_tmpdir={Path(tmp) / 'test_tmpdir'}", *args.tests]
        (Path(tmp) / "test_tmpdir").mkdir()
        try:
            runpy.run_path(str(tree / TEST), run_name="__main__")
        except SystemExit as exc:
            return int(exc.code or 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
