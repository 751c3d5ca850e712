"""TensorFlow Serving inference container with pre/post-processing, compatible with Amazon SageMaker hosting."""

from .errors import HandlerError  # light (imports nothing): `from sagemaker_tfs import HandlerError` in scripts

__version__ = "0.1.0"
__all__ = ["HandlerError", "__version__"]
