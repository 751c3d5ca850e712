"""`sagemaker_inference.decoder`: `decode(data, content_type)`, the default input_fn's decoding. An NPY body is
never unpickled, even when a script calls it directly (the toolkit's allow_pickle=True runs a client's code)."""

from sagemaker_tfs.toolkit.arrays import decode

__all__ = ["decode"]
