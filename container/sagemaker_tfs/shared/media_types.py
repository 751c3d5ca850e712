"""The media types the container reads and writes, with their aliases: one table for the default handler
(codecs.py), the inference toolkit contract's defaults (toolkit/arrays.py) and the local Batch Transform runner
(transform/), so that all accept the same names.

A new type is one row (and a Format member when it is a new format); each user picks the formats it handles
(`names(Format.JSON, ...)`), so a row for a format it does not handle changes nothing for it. Names are
compared in lower case without parameters (`application/json; charset=utf-8` is JSON).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .str_enum import StrEnum

JSON = "application/json"
JSON_LINES = "application/jsonlines"
JSONS = "application/jsons"  # the original container's alias
CSV = "text/csv"
NPY = "application/x-npy"  # the SageMaker SDK's NumpySerializer / NumpyDeserializer


class Format(StrEnum):
    JSON = "json"  # one JSON value
    JSON_LINES = "jsonlines"  # one JSON value per line
    CSV = "csv"  # RFC 4180 rows
    NPY = "npy"  # a NumPy .npy file, never unpickled (npy.py)


@dataclass(frozen=True)
class MediaType:
    name: str  # the name we answer with when asked for no particular alias
    format: Format
    aliases: tuple[str, ...] = ()  # other names of the same format, accepted alike

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


TABLE = (
    MediaType(JSON, Format.JSON),
    MediaType(JSON_LINES, Format.JSON_LINES, aliases=(JSONS, "application/x-jsonlines", "application/jsonl")),
    MediaType(CSV, Format.CSV),
    MediaType(NPY, Format.NPY),
)

_BY_NAME = {name: media for media in TABLE for name in media.names}

# The formats of the inference toolkit contract's default input_fn / output_fn (toolkit/arrays.py), JSON first.
TOOLKIT_FORMATS = (Format.JSON, Format.CSV, Format.NPY, Format.JSON_LINES)


def base(content_type: str | None) -> str:
    """The media type of a Content-Type or Accept entry: lower case, without parameters ('' for none)."""
    return content_type.split(";", 1)[0].strip().lower() if content_type else ""


def parameters(content_type: str) -> Iterator[tuple[str, str]]:
    """(name in lower case, value without surrounding blanks) of each parameter of a Content-Type or Accept entry
    (`charset`, `q`), in order."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        yield name.strip().lower(), value.strip()


def lookup(content_type: str | None) -> MediaType | None:
    """The table's row for a Content-Type (any alias, any case, parameters ignored), or None."""
    return _BY_NAME.get(base(content_type))


def format_of(content_type: str | None) -> Format | None:
    media = lookup(content_type)
    return None if media is None else media.format


def names(*formats: Format) -> tuple[str, ...]:
    """Every name (aliases included) of the given formats, in table order."""
    return tuple(name for media in TABLE if media.format in formats for name in media.names)
