"""A SavedModel whose load waits at a gate: its main_op reads a FIFO, so that the model server's load of it
blocks until the test opens the FIFO for writing. Tests use it to hold a load in flight for as long as they
need (no sleeps, no timing): a slow load, a load past its deadline, a model server killed while loading.

    python gated_model.py EXPORT_DIR FIFO      writes EXPORT_DIR/1/saved_model.pb (y = 0.5 x + 2)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path


def build(export_dir: Path, fifo: Path) -> Path:
    """Export the model (in a subprocess: the test process need not import TensorFlow)."""
    subprocess.run([sys.executable, __file__, str(export_dir), str(fifo)], check=True, capture_output=True)
    return export_dir


class Gate:
    """The FIFO a gated model's load reads: open() opens it for the next load."""

    def __init__(self, path: Path):
        self.path = path
        if not path.exists():
            os.mkfifo(path)

    def open(self) -> threading.Thread:
        """Let the load waiting at the gate (or the next one) finish."""
        def release():
            with open(self.path, "wb"):  # blocks until the load opens the FIFO for reading; then EOF
                pass

        thread = threading.Thread(target=release, daemon=True)
        thread.start()
        return thread


def _export(export_dir: Path, fifo: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        y = tf.add(tf.multiply(x, 0.5), 2.0, name="y")
        # Assert is stateful, so that graph optimizations keep the read (an unused ReadFile would be pruned)
        contents = tf.io.read_file(str(fifo))
        main_op = tf.group(tf.debugging.Assert(tf.equal(tf.strings.length(contents), 0), [contents]), name="gate")
        builder = tf.compat.v1.saved_model.Builder(str(export_dir / "1"))
        signature = tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={"serving_default": signature},
                                             main_op=main_op)
        builder.save()


if __name__ == "__main__":
    _export(Path(sys.argv[1]), Path(sys.argv[2]))
