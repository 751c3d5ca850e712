"""Content-Type and Accept header values (latin-1, as WSGI gives them) through the default handler's negotiation
(codecs.negotiate, response_type, preferred_type, tfs_request's choice of format; shared/media_types.py): only
the documented answers, a type of the list or none, a 406 or a 415 naming the header, and nothing else."""

from __future__ import annotations

from sagemaker_tfs import codecs
from sagemaker_tfs.errors import HandlerError
from sagemaker_tfs.shared import media_types

MODULES = ("sagemaker_tfs.codecs", "sagemaker_tfs.shared.media_types")
MAX_LEN = 1024  # a header line; nginx allows 8 KiB, and every step is linear in it


def seeds() -> list[bytes]:
    """Accept and Content-Type values of test/unit/test_codecs.py and test/app/test_app_default_handler.py."""
    return [
        value.encode("latin-1")
        for value in (
            "application/json",
            "Application/JSON; charset=utf-8",
            " text/csv ;header=present",
            "*",
            "TEXT/CSV; charset=utf-8",
            "text/*",
            "application/*",
            "application/jsons",
            "text/csv, application/json",
            "text/csv;q=0.5, application/json;q=0.4",
            "image/png, text/csv",
            "application/xml, */*;q=0.1",
            "application/json;q=0, */*",
            "text/csv;q=x",
            "image/*",
            "text/plain;q=0.2, image/png",
            "image/png;q=0, text/*, text/csv",
            "image/png, text/csv;q=0.9, application/json;q=0.5",
            "application/x-npy",
            "application/x-image",
            "application/jsonlines;q=1e400, application/jsonl;q=nan",
        )
    ]


def one_input(data: bytes) -> None:
    header = data.decode("latin-1")
    chosen = codecs.negotiate(header)
    assert chosen is None or chosen in codecs.RESPONSE_TYPES, chosen
    try:
        assert codecs.response_type(header) == chosen
    except HandlerError as exc:
        assert (chosen, exc.status) == (None, 406) and repr(header) in exc.message, (chosen, exc.status)
    preferred = codecs.preferred_type(header)
    named = {media_types.base(entry) for entry in header.split(",")}
    assert preferred is None or ("*" not in preferred and preferred in named), preferred
    # as a Content-Type: one of the formats (none means JSON), or a 415 naming it
    readable = media_types.format_of(header) is not None or not media_types.base(header)
    try:
        codecs.tfs_request(b"1", header)
    except HandlerError as exc:
        if exc.status == 415:
            assert not readable and repr(header) in exc.message, exc.message
        else:  # NPY: the body is not an NPY file
            assert exc.status == 400 and media_types.format_of(header) is media_types.Format.NPY, exc.message
    else:
        assert readable, header
