"""The import names of the SageMaker inference toolkit (`sagemaker-inference`) that scripts use, provided by this
container so that scripts written for the toolkit run unchanged; not the toolkit's code. See the README's
"The inference toolkit contract" section.

    errors                     BaseInferenceToolkitError, GenericInferenceToolkitError, UnsupportedFormatError
    decoder.decode             request bodies to numpy (NPY never unpickled)
    encoder.encode             predictions to bodies
    content_types              JSON, CSV, NPY, NPZ, ANY, OCTET_STREAM, UTF8_TYPES
    default_inference_handler  DefaultInferenceHandler
"""

__version__ = "1.10.1"  # the toolkit version whose names these are (pip sees sagemaker-tfs, not this)
