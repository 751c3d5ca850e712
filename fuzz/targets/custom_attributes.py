"""The custom attributes header (app/context.tfs_attributes): a HandlerError 400 or a valid target."""

from sagemaker_tfs.app.context import tfs_attributes
from sagemaker_tfs.errors import HandlerError

MODULES = ("sagemaker_tfs.app.context",)


def seeds() -> list[bytes]:
    return [b"tfs-model-name=half_plus_three,tfs-model-version=1", b"tfs-method=classify", b"x=1,tfs-model-name=a"]


def one_input(data: bytes) -> None:
    header = data.decode("latin-1")
    try:
        tfs_attributes(header)
    except HandlerError as exc:
        assert exc.status == 400, exc.status
