"""Helpers of the examples' tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import functools
import importlib.util
import io
import subprocess
from pathlib import Path

import numpy as np
from paths import REPO

EXAMPLES = REPO / "model_examples"


def run(*args, expect: int = 0) -> subprocess.CompletedProcess:
    """Run a command to its end; fail, showing its output, unless it exits with `expect`."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)
    assert result.returncode == expect, f"{args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


def held_out_digits() -> tuple[np.ndarray, np.ndarray]:
    """The digits images the examples do not train on (each fifth one): 8x8 arrays of 0-16, and their labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    held_out = np.arange(len(digits.target)) % 5 == 0
    return digits.images[held_out], digits.target[held_out]


def encode_image(digit: np.ndarray, image_format: str, size: int = 32) -> bytes:
    """An 8x8 digit (0-16) as a PNG or JPEG file of size x size pixels, ink bright on black."""
    from PIL import Image

    image = Image.fromarray((digit * 255 / 16).round().astype(np.uint8), "L")
    buffer = io.BytesIO()
    image.resize((size, size), Image.NEAREST).save(buffer, image_format)
    return buffer.getvalue()


@functools.cache
def _signature(version_dir: Path):
    import tensorflow as tf

    return tf.saved_model.load(str(version_dir)).signatures["serving_default"]


def model_outputs(version_dir: Path, **inputs) -> dict[str, np.ndarray]:
    """The SavedModel's serving_default signature run in this process: what the served model must answer."""
    import tensorflow as tf

    outputs = _signature(version_dir)(**{name: tf.constant(value) for name, value in inputs.items()})
    return {name: tensor.numpy() for name, tensor in outputs.items()}


def build_module(example: str):
    """An example's build.py as a module (for its data generators and constants); importing it imports TensorFlow."""
    path = EXAMPLES / example / "build.py"
    spec = importlib.util.spec_from_file_location(f"{example}_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
