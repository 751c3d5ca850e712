"""`sagemaker_inference.errors`: the toolkit's exceptions; raised by a script, they choose the answer's status."""

from sagemaker_tfs.toolkit.errors import BaseInferenceToolkitError, GenericInferenceToolkitError, UnsupportedFormatError

__all__ = ["BaseInferenceToolkitError", "GenericInferenceToolkitError", "UnsupportedFormatError"]
