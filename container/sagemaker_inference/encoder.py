"""`sagemaker_inference.encoder`: `encode(array_like, content_type)`, the default output_fn's encoding (str for
JSON, CSV and JSON lines, bytes for NPY); another type raises UnsupportedFormatError."""

from sagemaker_tfs.toolkit.arrays import TYPES as SUPPORTED_CONTENT_TYPES
from sagemaker_tfs.toolkit.arrays import encode

__all__ = ["SUPPORTED_CONTENT_TYPES", "encode"]
