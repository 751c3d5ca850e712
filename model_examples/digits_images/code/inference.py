"""Pre- and post-processing for the digits classifier: one PNG or JPEG image in, its digit and probabilities out.

    curl -H "Content-Type: application/x-image" --data-binary @samples/7.png http://localhost:8080/invocations
    {"class": 7, "probabilities": [0.0001, ...]}

The model decodes the image itself (its input is `image_bytes`), so the handlers only wrap and unwrap JSON and
the worker never imports TensorFlow or an image library.
"""

import base64
import json

from sagemaker_tfs import HandlerError
from sagemaker_tfs.codecs import media_type

IMAGE_TYPES = ("application/x-image", "image/png", "image/jpeg")


def input_handler(data, context):
    if media_type(context.request_content_type) not in IMAGE_TYPES:
        raise HandlerError(
            415, f"send one PNG or JPEG image as application/x-image, not {context.request_content_type}"
        )
    image = data.read()
    if not image:
        raise HandlerError(400, "the request body is empty: send one PNG or JPEG image")
    # Binary values travel in TensorFlow Serving's JSON as {"b64": "<base64>"}.
    return json.dumps({"instances": [{"b64": base64.b64encode(image).decode("ascii")}]})


def output_handler(response, context):
    if response.status_code != 200:  # e.g. 400 for bytes that are not an image
        raise HandlerError(response.status_code, response.json()["error"])
    prediction = response.json()["predictions"][0]
    answer = {"class": prediction["classes"], "probabilities": prediction["probabilities"]}
    return json.dumps(answer), "application/json"
