"""A SavedModel whose load waits at a gate: its main_op (run by the loader) loops, pausing 20 ms per turn, until
a file exists, so that the model server's load of it lasts until the test opens the gate. Tests use it to hold
a load in flight for as long as they need (no sleeps, no timing in the tests): a slow load, a load past its
deadline, a model server killed while loading.

    python gated_model.py EXPORT_DIR GATE_FILE      writes EXPORT_DIR/1/saved_model.pb (y = 0.5 x + 2)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def build(export_dir: Path, gate_file: Path) -> Path:
    """Export the model (in a subprocess: the test process need not import TensorFlow)."""
    subprocess.run([sys.executable, __file__, str(export_dir), str(gate_file)], check=True, capture_output=True)
    return export_dir


class Gate:
    """The file a gated model's load waits for."""

    def __init__(self, path: Path):
        self.path = path

    def open(self) -> None:
        """Let the loads waiting at the gate, and every later one, finish."""
        self.path.touch()

    def close(self) -> None:
        """Make the next loads wait."""
        self.path.unlink(missing_ok=True)


def _export(export_dir: Path, gate_file: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    from tensorflow.python.data.experimental.ops.testing import sleep

    tf.compat.v1.disable_eager_execution()
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        x = tf.compat.v1.placeholder(tf.float32, [None], name="x")
        y = tf.add(tf.multiply(x, 0.5), 2.0, name="y")
        gate = str(gate_file)

        def closed(turns):  # the pattern depends on the loop, or constant folding would look only once
            pattern = tf.strings.join([gate, tf.strings.substr(tf.strings.as_string(turns), 0, 0)])
            return tf.equal(tf.size(tf.io.matching_files(pattern)), 0)

        def pause(turns):  # a dataset's sleep: the loop waits without spinning a core
            nap = tf.data.Dataset.range(1).apply(sleep(20000))
            return [turns + 1 + nap.reduce(tf.constant(0, tf.int64), lambda total, value: total + value)]

        turns = tf.while_loop(closed, pause, [tf.constant(0, tf.int64)])
        # Assert is stateful, so that graph optimizations keep the loop (an unused one would be pruned)
        main_op = tf.group(tf.debugging.Assert(tf.greater_equal(turns, 0), [turns]), name="gate")
        builder = tf.compat.v1.saved_model.Builder(str(export_dir / "1"))
        signature = tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": y})
        builder.add_meta_graph_and_variables(
            session, ["serve"], signature_def_map={"serving_default": signature}, main_op=main_op
        )
        builder.save()


if __name__ == "__main__":
    _export(Path(sys.argv[1]), Path(sys.argv[2]))
