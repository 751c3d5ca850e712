"""Export two models that one request uses in turn: an encoder of digit images and a classifier of its features.

    python model_examples/two_models/build.py [EXPORT_DIR]    (default: model_examples/two_models/export)

writes one folder per model, as the container serves several models:
    EXPORT_DIR/encoder/1      pixels (64 values, 0-16, an 8x8 digit of scikit-learn's digits) -> features (16)
    EXPORT_DIR/classifier/1   features -> classes, probabilities (strongly regularised)
    EXPORT_DIR/classifier/2   the same, less regularised: the newest version, served by default
The encoder is a PCA and the classifiers are logistic regressions, fitted with scikit-learn in about a second on
every image but each fifth one (held out for testing), then written as TensorFlow functions.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.decomposition import PCA  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

CLASSIFIER_REGULARISATION = {1: 0.001, 2: 0.1}  # version -> scikit-learn's C (smaller: stronger)


def export(function, input_spec: tf.TensorSpec, version_dir: Path) -> None:
    """Write `function` of one input as a SavedModel whose serving_default signature is that function."""
    module = tf.Module()
    module.serve = tf.function(function, input_signature=[input_spec])
    tf.saved_model.save(module, str(version_dir), signatures={"serving_default": module.serve})


def classifier(fit: LogisticRegression):
    """The fitted logistic regression as a TensorFlow function."""
    weights, bias = fit.coef_.T.astype(np.float32), fit.intercept_.astype(np.float32)

    def classify(features):
        probabilities = tf.nn.softmax(features @ weights + bias)
        return {"classes": tf.argmax(probabilities, axis=1), "probabilities": probabilities}

    return classify


def main(export_dir: Path) -> Path:
    digits = load_digits()
    train = np.arange(len(digits.target)) % 5 != 0
    pca = PCA(16, random_state=0).fit(digits.data[train])
    mean, components = pca.mean_.astype(np.float32), pca.components_.T.astype(np.float32)

    def encode(pixels):
        return {"features": (pixels - mean) @ components}

    export(encode, tf.TensorSpec([None, 64], tf.float32, name="pixels"), export_dir / "encoder" / "1")

    features = pca.transform(digits.data[train])
    for version, c in CLASSIFIER_REGULARISATION.items():
        fit = LogisticRegression(C=c, max_iter=5000).fit(features, digits.target[train])
        export(
            classifier(fit),
            tf.TensorSpec([None, 16], tf.float32, name="features"),
            export_dir / "classifier" / str(version),
        )
    return export_dir


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "export"
    print(f"exported {main(target)}")
