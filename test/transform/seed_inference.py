"""code/inference.py of the acceptance tests' "seed" model: the seed write-up's script, ported to this container.

The write-up's model answered ["🍣", "🍵"][value % 2]; here half_plus_three computes y = 0.5 * value + 3, and the
emoji comes from 2y - 6 = value, so the outputs are the write-up's.
  application/json       the write-up's input_fn: json.loads of the whole body, one {"value": n} per request
                         (several lines fail with "Extra data: line 2 column 1 (char 12)", as in the write-up);
  application/jsonlines  the write-up's second version: one {"value": n} (or a bare number) per line;
  application/x-tfrecord, application/x-recordio
                         a framed body (MultiRecord) is unframed here; an unframed one (SingleRecord) is one
                         value; each answer line says which it was: {"framed": true, "y": 3.5}.
A value "fail400" or "fail500" makes the request fail with that status.
Output, for JSON: the write-up's output_fn, {"output": "I want to 🍵"} per record, joined by newlines.
"""

import json
import struct

import requests
from sagemaker_tfs import HandlerError

EMOJI = ["🍣", "🍵"]
RECORDIO_MAGIC = 0xCED7230A


def _tfrecords(body):
    values, pos = [], 0
    while pos + 12 <= len(body):
        (length,) = struct.unpack_from("<Q", body, pos)
        values.append(body[pos + 12 : pos + 12 + length])
        pos += 12 + length + 4
    return values if values and pos == len(body) else None


def _recordio(body):
    values, pos = [], 0
    while pos + 8 <= len(body):
        magic, header = struct.unpack_from("<II", body, pos)
        if magic != RECORDIO_MAGIC:
            return None
        length = header & ((1 << 29) - 1)
        values.append(body[pos + 8 : pos + 8 + length])
        pos += 8 + length + (-length % 4)
    return values if values and pos == len(body) else None


def _value(item):
    value = item["value"] if isinstance(item, dict) else item
    if value in ("fail400", "fail500"):
        raise HandlerError(int(value[4:]), f"record refused on purpose: {value}")
    return value


def handler(data, context):
    body = data.read()
    content_type = context.request_content_type
    framed = None
    if content_type == "application/json":
        values = [_value(json.loads(body.decode("utf-8")))]
    elif content_type == "application/jsonlines":
        values = [_value(json.loads(line)) for line in body.decode("utf-8").split("\n") if line]
    elif content_type in ("application/x-tfrecord", "application/x-recordio"):
        parts = (_tfrecords if content_type == "application/x-tfrecord" else _recordio)(body)
        framed = parts is not None
        values = [_value(float(part)) for part in (parts if framed else [body])]
    else:
        raise HandlerError(415, f"unsupported content type {content_type}")
    response = requests.post(context.rest_uri, json={"instances": values}, timeout=60)
    if response.status_code != 200:
        raise HandlerError(response.status_code, response.text)
    predictions = response.json()["predictions"]
    if framed is not None:
        lines = [json.dumps({"framed": framed, "y": y}) for y in predictions]
    else:
        lines = [
            json.dumps({"output": f"I want to {EMOJI[round(2 * y - 6) % 2]}"}, ensure_ascii=False) for y in predictions
        ]
    return "\n".join(lines), "application/json"
