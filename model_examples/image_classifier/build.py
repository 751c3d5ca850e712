"""Train a tiny CNN that tells three kinds of synthetic colour images apart, and export it for serving.

    python model_examples/image_classifier/build.py [EXPORT_DIR]    (default: model_examples/image_classifier/export)

writes EXPORT_DIR/1/saved_model.pb. Its serving_default signature takes `images` (float32 [None, 32, 32, 3], pixel
values 0 to 255: a batch of RGB images) and returns one output, `probabilities` (float32 [None, 3]), in the order of
CLASSES. The images are drawn by `images()`: training uses seed 0, the held-out images (`images(seed=1)`) are never
trained on. Training takes seconds on a CPU.
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SIZE = 32
CLASSES = ("horizontal stripes", "vertical stripes", "blob")  # code/inference.py names them in this order


def images(count: int = 300, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """`count` uint8 RGB images [count, 32, 32, 3] of the three classes in turn, and their labels: stripes of a
    random period, phase and pair of colours, or a disc of random colour and radius near the centre, plus noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:SIZE, 0:SIZE]
    labels = np.arange(count) % len(CLASSES)
    batch = np.empty((count, SIZE, SIZE, 3), np.float64)
    for i, label in enumerate(labels):
        ink, paper = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
        while np.abs(ink - paper).sum() < 150:  # colours far enough apart to see a shape
            ink = rng.uniform(0, 255, 3)
        if label == 2:
            centre = SIZE / 2 + rng.uniform(-4, 4, 2)
            mask = np.hypot(y - centre[0], x - centre[1]) < rng.uniform(5, 11)
        else:
            period, phase = rng.integers(4, 11), rng.integers(0, 10)
            mask = ((y if label == 0 else x) + phase) % period < period / 2
        batch[i] = np.where(mask[..., None], ink, paper) + rng.normal(0, 20, (SIZE, SIZE, 3))
    return np.clip(batch, 0, 255).round().astype(np.uint8), labels


def train() -> keras.Model:
    pixels, labels = images(600, seed=0)
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((SIZE, SIZE, 3)),
            keras.layers.Rescaling(1 / 255),  # in the graph: clients send pixels as they are (0 to 255)
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(8, 3, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(len(CLASSES), activation="softmax"),
        ]
    )
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(pixels.astype(np.float32), labels, epochs=20, batch_size=32, verbose=0)
    return model


def main(export_dir: Path) -> Path:
    model = train()

    def serve(images):
        # One output: the default handler can then answer NPY (a multi-output model's rows are objects).
        return {"probabilities": model(images)}

    # Keras 3 models must be exported with ExportArchive (see digits_images/build.py).
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serving_default", serve, [tf.TensorSpec([None, SIZE, SIZE, 3], tf.float32, name="images")])
    version_dir = export_dir / "1"
    archive.write_out(str(version_dir), verbose=False)
    return version_dir


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "export"
    print(f"exported {main(target)}")
