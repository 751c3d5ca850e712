"""The two_models example over gRPC: the same two model calls, as PredictRequests on the model server's gRPC port.

Same requests and answers as ../two_models/code/inference.py. gRPC carries the tensors in binary, so the features
are never written as JSON text between the two models.
Importing the tensorflow-serving-api protos imports TensorFlow: each worker starts a few seconds slower and uses
a few hundred MB more; TensorFlow's tensor helpers (make_tensor_proto, make_ndarray) then come for free.
"""

import functools
import json

import grpc
import numpy as np
import tensorflow as tf
from sagemaker_tfs import HandlerError
from sagemaker_tfs.codecs import default_input_handler
from sagemaker_tfs.shared.error_codes import HTTP_STATUS
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

FIRST_MODEL = "encoder"
SECOND_MODEL = "classifier"  # unless the request names another one (tfs-model-name)


def handler(data, context):
    request = json.loads(default_input_handler(data, context))
    if "instances" not in request:
        raise HandlerError(400, 'send {"instances": [[64 pixel values], ...]}, JSON lines or CSV')
    pixels = np.array(request["instances"], np.float32)
    features = predict(context, FIRST_MODEL, {"pixels": pixels})["features"]
    answer = predict(context, context.model_name or SECOND_MODEL, {"features": features}, context.model_version)
    predictions = [
        {"classes": int(c), "probabilities": p.tolist()}
        for c, p in zip(answer["classes"], answer["probabilities"], strict=True)
    ]
    return json.dumps({"features": features.tolist(), "predictions": predictions}), "application/json"


@functools.cache
def stub(port):
    """A client of the model server on `port`: made once per worker and port, reused by every request."""
    return prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(f"localhost:{port}"))


def predict(context, model, inputs, version=None):
    """The outputs (numpy arrays) of a model of this container for `inputs` (name -> array)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    if version:
        request.model_spec.version.value = int(version)
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    try:
        response = stub(context.grpc_port).Predict(request, timeout=context.timeout)
    except grpc.RpcError as error:  # the same statuses as the REST API's: 404 for an unknown model, ...
        raise HandlerError(HTTP_STATUS.get(error.code().value[0], 500), f"model {model}: {error.details()}") from None
    return {name: tf.make_ndarray(tensor) for name, tensor in response.outputs.items()}
