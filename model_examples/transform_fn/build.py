"""Fit a linear model of scikit-learn's diabetes data set, for the model_fn + transform_fn script in code/.

    python model_examples/transform_fn/build.py [EXPORT_DIR]    (default: model_examples/transform_fn/export)

writes EXPORT_DIR/model.json: {"features": [10 names], "coefficients": [10 numbers], "intercept": number}, a
least-squares fit of the disease progression on the ten (scaled) features, over every row except each fifth
one (held out for testing). No SavedModel: the script's model_fn reads this file, no model server runs.
"""

import json
import sys
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes

HERE = Path(__file__).resolve().parent


def held_out() -> tuple[np.ndarray, np.ndarray]:
    data = load_diabetes()
    rows = np.arange(len(data.target)) % 5 == 0
    return data.data[rows], data.target[rows]


def fit() -> dict:
    data = load_diabetes()
    rows = np.arange(len(data.target)) % 5 != 0
    features = np.hstack([data.data[rows], np.ones((rows.sum(), 1))])
    solution, *_ = np.linalg.lstsq(features, data.target[rows], rcond=None)
    return {
        "features": list(data.feature_names),
        "coefficients": solution[:-1].tolist(),
        "intercept": float(solution[-1]),
    }


def main(export_dir: Path) -> Path:
    export_dir.mkdir(parents=True, exist_ok=True)
    path = export_dir / "model.json"
    path.write_text(json.dumps(fit(), indent=1))
    return path


if __name__ == "__main__":
    print(f"wrote {main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / 'export')}")
