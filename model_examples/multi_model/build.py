"""Export the three models of the multi-model example into a model root, each folder as SageMaker unpacks its
model.tar.gz:

    python model_examples/multi_model/build.py [MODEL_ROOT]     (default: model_examples/multi_model/models)

    MODEL_ROOT/half_plus_two/1/, 2/     y = 0.5 x + 2 (version 1) and y = 0.5 x + 2.5 (version 2); no code/
    MODEL_ROOT/half_plus_ten/1/ + code/ y = 0.5 x + 10, with its own code/inference.py (plain-text numbers)
    MODEL_ROOT/times_two/1/             y = 2 x; no code/

Models without code/ get the universal script (model_examples/multi_model/universal/inference.py) when
SAGEMAKER_MULTI_MODEL_CODE_DIR names that folder. Each serving_default takes `x` (float32, any shape), returns `y`.
"""

import os
import shutil
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
MODELS = {  # folder: {version: (slope, intercept)}
    "half_plus_two": {1: (0.5, 2.0), 2: (0.5, 2.5)},
    "half_plus_ten": {1: (0.5, 10.0)},
    "times_two": {1: (2.0, 0.0)},
}


class Linear(tf.Module):
    def __init__(self, slope: float, intercept: float):
        super().__init__()
        self.slope, self.intercept = slope, intercept

    @tf.function(input_signature=[tf.TensorSpec(shape=None, dtype=tf.float32, name="x")])
    def serve(self, x):
        return {"y": self.slope * x + self.intercept}


def main(root: Path) -> Path:
    for name, versions in MODELS.items():
        for version, (slope, intercept) in versions.items():
            model = Linear(slope, intercept)
            tf.saved_model.save(model, str(root / name / str(version)), signatures={"serving_default": model.serve})
        code = HERE / "code" / name
        if code.is_dir():
            shutil.copytree(code, root / name / "code", dirs_exist_ok=True)
    return root


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "models"
    print(f"exported {', '.join(MODELS)} into {main(target)}")
