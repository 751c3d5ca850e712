"""One request, two models: the encoder turns digit pixels into features, a classifier classifies those features.
The answer holds both models' answers.

    curl -H "Content-Type: application/json" -d @samples/digits.json http://localhost:8080/invocations
    {"features": [[-1.26, ...], ...], "predictions": [{"classes": 0, "probabilities": [0.98, ...]}, ...]}

The request is the pixels of one or more 8x8 digits (64 values from 0 to 16 each) as JSON, JSON lines or CSV:
the container's default input handler turns it into the encoder's request. The classifier is the model the
request names with the custom attributes `tfs-model-name` and `tfs-model-version` (both in the context), by
default the newest version of "classifier". Both models are served by the same model server: their URLs differ
from context.rest_uri only by the model name and version.
"""

import json

import requests
from sagemaker_tfs import HandlerError
from sagemaker_tfs.codecs import default_input_handler

FIRST_MODEL = "encoder"
SECOND_MODEL = "classifier"  # unless the request names another one

session = requests.Session()  # keeps the connection to the model server open between requests


def handler(data, context):
    features = predict(context, FIRST_MODEL, default_input_handler(data, context))
    predictions = predict(
        context, context.model_name or SECOND_MODEL, json.dumps({"instances": features}), context.model_version
    )
    return json.dumps({"features": features, "predictions": predictions}), "application/json"


def predict(context, model, body, version=None):
    """The predictions of a model of this container for a TensorFlow Serving REST request body."""
    server = context.rest_uri.split("/v1/models/")[0]
    url = f"{server}/v1/models/{model}" + (f"/versions/{version}" if version else "") + ":predict"
    response = session.post(url, data=body, timeout=context.timeout)
    if response.status_code != 200:
        raise HandlerError(response.status_code, f"model {model}: {response.json()['error']}")
    return response.json()["predictions"]
