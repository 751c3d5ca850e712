"""Fit a small insurance price model on generated quotations and export it.

    python model_examples/csv_with_ids/build.py [EXPORT_DIR]    (default: model_examples/csv_with_ids/export)

writes EXPORT_DIR/1/saved_model.pb. Its serving_default signature takes one tensor per feature, batched:
year, month, stage_id, company_id, product_modality_id, cover_3 (int64) and province (string), and returns
`price` (float32). The categorical features are one-hot encoded inside the graph, so clients send raw values.
The training data are generated from `true_price` plus noise; a least-squares fit takes milliseconds.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

FEATURES = ("year", "month", "stage_id", "company_id", "product_modality_id", "cover_3", "province")
PROVINCES = ["A Coruña", "Ávila", "Barcelona", "Cádiz", "León", "Madrid", "Málaga"]
COMPANY_SURCHARGE = {1: 0.0, 2: 35.0, 3: -20.0, 4: 60.0}
PROVINCE_SURCHARGE = dict(zip(PROVINCES, [10.0, -15.0, 45.0, 5.0, -25.0, 50.0, 20.0], strict=True))


def true_price(quote: dict) -> float:
    """The price formula the data are generated from (what the model should learn)."""
    return (
        300.0
        + 25.0 * (quote["year"] - 2017)
        + 2.0 * quote["month"]
        + 80.0 * quote["stage_id"]
        + COMPANY_SURCHARGE[quote["company_id"]]
        + 15.0 * quote["product_modality_id"]
        + 120.0 * quote["cover_3"]
        + PROVINCE_SURCHARGE[quote["province"]]
    )


def generate(count: int) -> tuple[dict, np.ndarray]:
    """`count` random quotations (a dict of feature tensors) and their noisy prices."""
    rng = np.random.default_rng(0)
    columns = {
        "year": rng.integers(2017, 2021, count),
        "month": rng.integers(1, 13, count),
        "stage_id": rng.integers(1, 4, count),
        "company_id": rng.integers(1, 5, count),
        "product_modality_id": rng.integers(1, 9, count),
        "cover_3": rng.integers(0, 2, count),
        "province": rng.choice(PROVINCES, count),
    }
    quotes = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    prices = np.array([true_price(q) for q in quotes]) + rng.normal(0.0, 10.0, count)
    return {name: tf.constant(values) for name, values in columns.items()}, prices


class PriceModel(tf.Module):
    """A linear model of the features, fitted by least squares to the prices."""

    def __init__(self, features: dict, prices: np.ndarray):
        super().__init__()
        self.provinces = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(PROVINCES, tf.range(len(PROVINCES), dtype=tf.int64)),
            default_value=len(PROVINCES),
        )  # an unknown province gets a column of its own, weighing nothing
        design = self.encode(features).numpy()
        self.weights = tf.Variable(np.linalg.lstsq(design, prices, rcond=None)[0])

    def encode(self, features: dict) -> tf.Tensor:
        """The design matrix of a batch: one row per quotation, numbers as they are, categories one-hot."""

        def number(name):
            return tf.cast(features[name], tf.float64)[:, None]

        def one_hot(index, depth):
            return tf.one_hot(index, depth, dtype=tf.float64)

        return tf.concat(
            [
                tf.ones_like(number("year")),
                number("year") - 2017,
                number("month"),
                one_hot(features["stage_id"], 4),
                one_hot(features["company_id"], 5),
                one_hot(features["product_modality_id"], 9),
                number("cover_3"),
                one_hot(self.provinces.lookup(features["province"]), len(PROVINCES) + 1),
            ],
            axis=1,
        )

    @tf.function(
        input_signature=[
            {name: tf.TensorSpec([None], tf.string if name == "province" else tf.int64, name=name) for name in FEATURES}
        ]
    )
    def serve(self, features):
        return {"price": tf.cast(tf.linalg.matvec(self.encode(features), self.weights), tf.float32)}


def main(export_dir: Path) -> Path:
    model = PriceModel(*generate(2000))
    version_dir = export_dir / "1"
    tf.saved_model.save(model, str(version_dir), signatures={"serving_default": model.serve})
    return version_dir


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "export"
    print(f"exported {main(target)}")
