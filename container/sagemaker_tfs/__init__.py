"""TensorFlow Serving inference container with pre/post-processing, compatible with Amazon SageMaker hosting."""

from .errors import HandlerError  # light (imports nothing): `from sagemaker_tfs import HandlerError` in scripts

__all__ = ["HandlerError", "__version__"]


def __getattr__(name: str) -> str:
    """`__version__`, from the package's metadata (its one source, pyproject.toml), read when first asked for."""
    if name == "__version__":
        from .shared.build_info import version

        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
