"""The MXNet-era interface (seed 004): model_fn loads the model, transform_fn handles the whole request.

    transform_fn(model, input_data, content_type, accept) -> (result, content type)

Requests: JSON (a list of rows of the 10 features, or {"instances": rows}) or CSV (one row per line). Answers:
JSON {"predictions": [...]} or CSV (one prediction per line), as Accept asks. Another type is answered with an
error of the status the script chooses (GenericInferenceToolkitError).
"""

import json
import os

import numpy as np
from sagemaker_inference import content_types, errors


class LinearModel:
    def __init__(self, coefficients, intercept):
        self.coefficients = np.asarray(coefficients)
        self.intercept = intercept

    def predict(self, rows):
        return rows @ self.coefficients + self.intercept


def model_fn(model_dir):
    with open(os.path.join(model_dir, "model.json")) as f:
        spec = json.load(f)
    return LinearModel(spec["coefficients"], spec["intercept"])


def transform_fn(model, input_data, content_type, accept):
    media = content_type.split(";")[0].strip()
    if media == content_types.JSON:
        rows = json.loads(input_data)
        rows = rows["instances"] if isinstance(rows, dict) else rows
    elif media == content_types.CSV:
        rows = [[float(field) for field in line.split(",")] for line in input_data.splitlines() if line.strip()]
    else:
        raise errors.GenericInferenceToolkitError(415, f"send JSON or CSV rows of 10 features, not {content_type}")
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, model.coefficients.size)
    predictions = model.predict(rows).round(3).tolist()
    if accept.startswith(content_types.CSV):
        return "\n".join(map(str, predictions)), content_types.CSV  # Batch Transform's AssembleWith adds the last
    return json.dumps({"predictions": predictions}), content_types.JSON
