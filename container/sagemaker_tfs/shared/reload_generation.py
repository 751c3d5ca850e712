"""The gRPC metadata key of a HandleReloadConfigRequest that carries the sender's counter of model lists: the
multi-model registry numbers its reloads (registry/owner.py) and the embedded model server applies a reload only
if no later one was applied (model_server/grpc_service.py). TensorFlow Serving ignores it."""

GENERATION_METADATA = "sagemaker-tfs-config-generation"
