"""Pre- and post-processing for Batch Transform over TFRecord files of tf.Example records.

With SplitType=TFRecord and BatchStrategy=SingleRecord, each request body is one serialized tf.Example (the
TFRecord framing removed). The input handler sends the image stored under `image/encoded` to the model, and the
output handler answers one compact JSON line, so that AssembleWith=Line writes a JSON lines file with one line
per record, in the order of the records:
    {"class":7,"probabilities":[0.0001,...]}
"""

import base64
import json

from sagemaker_tfs import HandlerError
from tf_example import bytes_list  # code/lib/tf_example.py: reads the record without importing TensorFlow


def input_handler(data, context):
    try:
        images = bytes_list(data.read(), "image/encoded")
    except KeyError:
        raise HandlerError(400, "the record has no image/encoded feature") from None
    except ValueError as exc:
        raise HandlerError(400, f"the request body is not a serialized tf.Example: {exc}") from None
    if len(images) != 1:
        raise HandlerError(400, f"image/encoded holds {len(images)} values; expected one encoded image")
    return json.dumps({"instances": [{"b64": base64.b64encode(images[0]).decode("ascii")}]})


def output_handler(response, context):
    if response.status_code != 200:
        raise HandlerError(response.status_code, response.json()["error"])
    prediction = response.json()["predictions"][0]
    answer = {"class": prediction["classes"], "probabilities": prediction["probabilities"]}
    return json.dumps(answer, separators=(",", ":")), "application/json"
