"""SavedModels the project builds itself for its tests, exported with TensorFlow in a subprocess.

    python test/models.py NAME EXPORT_DIR      writes EXPORT_DIR/1/saved_model.pb

Models:
  upper_strings   serving_default: `s` (string, any shape) -> `upper` (the strings upper-cased)
  sum_and_count   serving_default: `x` (float32 [batch, n]) -> `sum` (row sums), `count` (n per row);
                  two outputs, for multi-output responses
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def build(name: str, export_dir: Path) -> Path:
    """Export model `name` to export_dir/1 (in a subprocess: the test process need not import TensorFlow)."""
    subprocess.run([sys.executable, __file__, name, str(export_dir)], check=True, capture_output=True)
    return export_dir


def _export(name: str, export_dir: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    class UpperStrings(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(shape=None, dtype=tf.string, name="s")])
        def serve(self, s):
            return {"upper": tf.strings.upper(s)}

    class SumAndCount(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(shape=[None, None], dtype=tf.float32, name="x")])
        def serve(self, x):
            count = tf.fill([tf.shape(x)[0]], tf.shape(x)[1])
            return {"sum": tf.reduce_sum(x, axis=1), "count": count}

    module = {"upper_strings": UpperStrings, "sum_and_count": SumAndCount}[name]()
    tf.saved_model.save(module, str(export_dir / "1"), signatures={"serving_default": module.serve})


if __name__ == "__main__":
    _export(sys.argv[1], Path(sys.argv[2]))
