"""Protobuf messages of TFS's config files that tensorflow-serving-api does not ship, built from descriptors so
that the files are read by protobuf's own text-format parser (errors and syntax exactly protobuf's)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from google.protobuf.message import Message

# a field: (name, number, type, type name or None, repeated); type is a FieldDescriptorProto.TYPE_* name
Field = tuple[str, int, str, "str | None", bool]


@functools.cache
def message_class(file_name: str, messages: tuple[tuple[str, tuple[Field, ...]], ...], wanted: str) -> type[Message]:
    """The class of message `wanted` of a proto3 file in package tensorflow.serving declaring `messages`."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    proto = descriptor_pb2.FileDescriptorProto(
        name=file_name, package="tensorflow.serving", syntax="proto3", dependency=["google/protobuf/wrappers.proto"]
    )
    F = descriptor_pb2.FieldDescriptorProto
    for message_name, fields in messages:
        message = proto.message_type.add(name=message_name)
        for name, number, kind, type_name, repeated in fields:
            field = message.field.add(
                name=name,
                number=number,
                type=getattr(F, kind),
                label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL,
            )
            if type_name:
                field.type_name = type_name
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"tensorflow.serving.{wanted}"))


def parse_text(cls: type[Message], text: str, source: str, error: type[Exception]) -> Message:
    """A text-format message of class cls; a syntax error raises `error` with TFS's wording."""
    from google.protobuf import text_format

    message = cls()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as exc:
        raise error(
            f"Invalid protobuf file: '{source}': Error parsing text-format {cls.DESCRIPTOR.full_name}: {exc}"
        ) from None
    return message
