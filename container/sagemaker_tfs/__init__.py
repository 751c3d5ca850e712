"""TensorFlow Serving inference container with pre/post-processing, compatible with Amazon SageMaker hosting."""

__version__ = "0.1.0"
