"""The PyTorch batch inference story (seed 001) with a scikit-learn model: model_fn, input_fn, predict_fn and
output_fn, unchanged in shape. input_fn reads one image as bytes (application/x-image: PNG, JPEG, of any size), or
pixels as NPY or JSON (one 8x8 or 64-value image, or a batch of them)."""

import io
import json
import os

import joblib
import numpy as np
from PIL import Image
from sagemaker_inference import decoder, errors


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def load_from_bytearray(request_body):
    image = Image.open(io.BytesIO(request_body)).convert("L").resize((8, 8), Image.BOX)
    return np.asarray(image, dtype=np.float64).reshape(1, 64) * 16.0 / 255.0  # the training scale, 0 to 16


def input_fn(request_body, request_content_type):
    # the image arrives as a Python bytearray, as in the toolkit containers
    if request_content_type == "application/x-image":
        return load_from_bytearray(request_body)
    if request_content_type in ("application/x-npy", "application/json"):
        pixels = np.asarray(decoder.decode(request_body, request_content_type), dtype=np.float64)
        return pixels.reshape(-1, 64)
    raise errors.UnsupportedFormatError(request_content_type)


def predict_fn(input_object, model):
    return {"predictions": model.predict(input_object).tolist()}


def output_fn(predictions, response_content_type):
    return json.dumps(predictions)
