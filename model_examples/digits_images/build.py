"""Train a small classifier of scikit-learn's digits images and export it for serving PNG/JPEG bytes.

    python model_examples/digits_images/build.py [EXPORT_DIR]    (default: model_examples/digits_images/export)

writes EXPORT_DIR/1/saved_model.pb. Its serving_default signature takes `image_bytes` (a batch of encoded PNG or
JPEG images of any size, grayscale or colour), decodes and resizes them inside the graph to the 8x8 grayscale
pixels the network was trained on, and returns `classes` (the digit) and `probabilities` (10 per image).
Training uses every image except each fifth one (index % 5 == 0), held out for testing; it takes seconds on a CPU.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402


def train() -> keras.Model:
    digits = load_digits()  # 1,797 images of 8x8 pixels, 0 (background) to 16 (ink)
    train_set = np.arange(len(digits.target)) % 5 != 0  # each fifth image is held out for testing
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(digits.data[train_set] / 16.0, digits.target[train_set], epochs=30, batch_size=32, verbose=0)
    return model


def pixels(image_bytes: tf.Tensor) -> tf.Tensor:
    """One encoded image -> its 64 pixels scaled as in training (0 to 1, ink bright)."""
    image = tf.io.decode_image(image_bytes, channels=1, expand_animations=False)  # PNG, JPEG, GIF...
    # "area" averages blocks: an 8x8 digit scaled up (to survive JPEG) comes back to its own pixels
    image = tf.image.resize(tf.cast(image, tf.float32), [8, 8], method="area")
    return tf.reshape(image, [64]) / 255.0


def main(export_dir: Path) -> Path:
    model = train()

    def serve(image_bytes):
        batch = tf.map_fn(pixels, image_bytes, fn_output_signature=tf.TensorSpec([64], tf.float32))
        probabilities = model(batch)
        return {"classes": tf.argmax(probabilities, axis=1), "probabilities": probabilities}

    # Keras 3 models must be exported with ExportArchive: tf.saved_model.save of a tf.Module holding one writes
    # a SavedModel that TensorFlow Serving loads but cannot run ("Could not find variable ...").
    archive = keras.export.ExportArchive()
    archive.track(model)
    # The `_bytes` suffix is TensorFlow Serving's convention for binary inputs: in JSON, send {"b64": "..."}.
    archive.add_endpoint("serving_default", serve, [tf.TensorSpec([None], tf.string, name="image_bytes")])
    version_dir = export_dir / "1"
    archive.write_out(str(version_dir), verbose=False)
    return version_dir


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "export"
    print(f"exported {main(target)}")
