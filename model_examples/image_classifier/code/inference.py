"""Classify RGB images: numpy arrays in, class names and probabilities out, the pixels in binary all the way.

    curl -H "Content-Type: application/x-npy" --data-binary @samples/stripes.npy http://localhost:8080/invocations
    {"predictions": [{"class": "horizontal stripes", "probabilities": [0.999998, 1.3e-10, 2.1e-06]}]}

The request is one image [32, 32, 3] or a batch [N, 32, 32, 3] of pixel values 0 to 255, any numeric dtype (uint8
photos as they are), as NPY (`application/x-npy`, the SageMaker SDK's NumpySerializer) or as JSON
(`{"instances": nested lists}`). `context.predict_arrays` sends it to the model server as raw tensor bytes (a gRPC
Predict), never as JSON text, and gives back the output as a float32 array. The answer is JSON with the class names,
or, with `Accept: application/x-npy`, the probabilities themselves as an NPY float32 array [N, 3].
The worker needs numpy only (code/requirements.txt): no TensorFlow, no image library.
"""

import io
import json

import numpy as np
from sagemaker_tfs import HandlerError
from sagemaker_tfs.codecs import media_type, negotiate

CLASSES = ("horizontal stripes", "vertical stripes", "blob")  # the model's outputs, in build.py's order
SHAPE = (32, 32, 3)  # the model's input is [None, 32, 32, 3]: say so here rather than relay TFS's shape error
NPY, JSON = "application/x-npy", "application/json"


def handler(data, context):
    answer_type = negotiate(context.accept_header, (JSON, NPY))
    if answer_type is None:  # refuse before the model runs, not after
        raise HandlerError(406, f"accept {JSON} or {NPY}, not {context.accept_header}")
    images = read_images(data.read(), context.request_content_type)
    probabilities = context.predict_arrays(images)["probabilities"]  # uint8 etc. become float32 on the way
    if answer_type == NPY:
        buffer = io.BytesIO()
        np.save(buffer, probabilities)
        return buffer.getvalue(), NPY
    predictions = [{"class": CLASSES[row.argmax()], "probabilities": row.tolist()} for row in probabilities]
    return json.dumps({"predictions": predictions}), JSON


def read_images(body, content_type):
    """The request's images as a batch [N, 32, 32, 3] of numbers; HandlerError 400/415 for anything else."""
    media = media_type(content_type)
    if media not in (NPY, JSON):
        raise HandlerError(415, f'send images as {NPY} or {JSON} ({{"instances": ...}}), not {content_type}')
    if not body:
        raise HandlerError(400, "the request body is empty: send images as NPY or JSON")
    try:
        if media == NPY:
            images = np.load(io.BytesIO(body), allow_pickle=False)  # never unpickle what a client sends
        else:
            images = np.array(json.loads(body)["instances"])
    except (ValueError, KeyError, TypeError, OSError) as exc:  # corrupt NPY, invalid or ragged JSON, no "instances"
        raise HandlerError(400, f"cannot read the images ({type(exc).__name__}: {exc})") from None
    if images.ndim == len(SHAPE):
        images = images[np.newaxis]  # one image is a batch of one
    if images.shape[1:] != SHAPE or len(images) == 0 or images.dtype.kind not in "uif":
        raise HandlerError(
            400,
            f"send one image {list(SHAPE)} or a batch [N, {', '.join(map(str, SHAPE))}] of "
            f"numbers, not {images.dtype} {list(images.shape)}",
        )
    return images
