"""Read a feature of a serialized tf.train.Example with nothing but the protobuf wire format.

Handlers run in the web workers, which should not import TensorFlow (seconds to import, hundreds of MB per
worker) just to parse a record: this reader needs about forty lines instead. The messages, from
tensorflow/core/example/{example,feature}.proto:
    Example { Features features = 1; }
    Features { map<string, Feature> feature = 1; }   (map entries: key = 1, value = 2)
    Feature { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
"""


def bytes_list(example: bytes, name: str) -> list[bytes]:
    """The values of the bytes feature `name` of a serialized tf.train.Example.

    Raises KeyError when the example has no such feature, ValueError when it is not a valid message."""
    key = name.encode()
    for features in _values(example, 1):
        for entry in _values(features, 1):
            if next(_values(entry, 1), b"") == key:
                feature = next(_values(entry, 2), b"")
                return [value for values in _values(feature, 1) for value in _values(values, 1)]
    raise KeyError(name)


def _values(message: bytes, number: int):
    """The values of field `number` in a message, in order (bytes for length-delimited fields)."""
    return (value for field, value in _fields(message) if field == number)


def _fields(message: bytes):
    """(field number, value) of each field of a serialized protobuf message."""
    position, end = 0, len(message)
    while position < end:
        key, position = _varint(message, position)
        wire_type = key & 7
        if wire_type == 0:  # varint
            value, position = _varint(message, position)
        elif wire_type == 2:  # length-delimited: bytes, strings, sub-messages, packed lists
            length, position = _varint(message, position)
            value, position = message[position : position + length], position + length
        elif wire_type in (1, 5):  # fixed 64 or 32 bits
            size = 8 if wire_type == 1 else 4
            value, position = message[position : position + size], position + size
        else:
            raise ValueError(f"not a protobuf message: wire type {wire_type} at byte {position}")
        if position > end:
            raise ValueError("truncated protobuf message")
        yield key >> 3, value


def _varint(message: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if position >= len(message):
            raise ValueError("truncated protobuf message")
        byte = message[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
