"""Train a small scikit-learn classifier of the digits images, for the inference toolkit script in code/.

    python model_examples/digits_toolkit/build.py [EXPORT_DIR]    (default: model_examples/digits_toolkit/export)

writes EXPORT_DIR/model.joblib: a logistic regression on the 64 pixels (0 background to 16 ink) of scikit-learn's
8x8 digits, trained on every image except each fifth one (index % 5 == 0), held out for testing; it takes a
second on a CPU. There is no SavedModel: the script's model_fn loads this file and no model server runs.
"""

import sys
from pathlib import Path

import joblib
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

HERE = Path(__file__).resolve().parent


def train() -> LogisticRegression:
    digits = load_digits()
    train_set = np.arange(len(digits.target)) % 5 != 0
    return LogisticRegression(max_iter=5000).fit(digits.data[train_set], digits.target[train_set])


def main(export_dir: Path) -> Path:
    export_dir.mkdir(parents=True, exist_ok=True)
    path = export_dir / "model.joblib"
    joblib.dump(train(), path)
    return path


if __name__ == "__main__":
    print(f"wrote {main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / 'export')}")
