"""Export half_plus_three (y = 0.5 * x + 3) as a TF2 SavedModel, the smallest model to serve.

    python model_examples/half_plus_three/build.py [EXPORT_DIR]    (default: model_examples/half_plus_three/export)

writes EXPORT_DIR/1/saved_model.pb; its serving_default signature takes `x` (float32, any shape) and returns `y`.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402


class HalfPlusThree(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec(shape=None, dtype=tf.float32, name="x")])
    def serve(self, x):
        return {"y": 0.5 * x + 3.0}


def main(export_dir: Path) -> Path:
    model = HalfPlusThree()
    version_dir = export_dir / "1"
    tf.saved_model.save(model, str(version_dir), signatures={"serving_default": model.serve})
    return version_dir


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "export"
    print(f"exported {main(target)}")
