"""The handler scripts the app's tests run, in-process (test/app) and under gunicorn (test/gunicorn_app)."""

# handler(data, context); the request's "case" field says what to do. HANDLER_FILES go next to it in code/.
HANDLER_SCRIPT = """
import json

import falcon
import requests

from sagemaker_tfs import HandlerError
from helper import shout          # code/helper.py
from libmodule import LIB_VALUE   # code/lib/libmodule.py

RETURNS = {
    "tuple": lambda: ('{"ok": true}', "application/json"),
    "no-content-type": lambda: (b"raw", None),
    "with-status": lambda: ("created", "text/plain", 201),
    "two-chars": lambda: "ok",
    "bare-bytes": lambda: b"\\x00\\x01",
    "bare-dict": lambda: {"a": [1, 2]},
    "bare-list": lambda: [1, "x"],
    "none": lambda: None,
    "four-tuple": lambda: ("a", "text/plain", 200, "extra"),
    "float-body": lambda: (1.5, "text/csv"),
    "string-status": lambda: ("x", "text/plain", "400"),
    "interim-status": lambda: ("x", "text/plain", 100),
    "int-content-type": lambda: ("x", 5),
    "unserialisable": lambda: {"when": {1, 2}},
}


def handler(data, context):
    request = json.loads(data.read())
    case = request["case"]
    if case == "context":
        fields = context._asdict()
        fields["channel"] = type(fields["channel"]).__name__
        return json.dumps({"class": type(context).__name__, "names": list(context._fields), **fields}), None
    if case == "grpc":  # GetModelStatus for the default model, as raw protobuf bytes
        status = context.channel.unary_unary("/tensorflow.serving.ModelService/GetModelStatus")
        return status(b"\\n\\x11\\n\\x0fhalf_plus_three", timeout=10), "application/octet-stream"
    if case == "model":
        reply = requests.post(context.rest_uri, json={"instances": request["instances"]}, timeout=context.timeout)
        return reply.content, "application/json", reply.status_code
    if case == "imports":
        return {"helper": shout("hi"), "lib": LIB_VALUE}
    if case == "raise":
        raise ValueError("something broke")
    if case == "handler-error":
        raise HandlerError(request["status"], request["message"])
    if case == "falcon-error":
        raise falcon.HTTPError(falcon.HTTP_409, title="Conflict", description="already there",
                               headers={"Retry-After": "5"})
    return RETURNS[case]()
"""

HANDLER_FILES = {"helper.py": "def shout(text):\n    return text.upper()\n", "lib/libmodule.py": "LIB_VALUE = 42\n"}

# input_handler + output_handler; the custom attribute case=<name> tells the script what to do.
PAIR_SCRIPT = """
import io
import json

import requests

from sagemaker_tfs import HandlerError


def _case(context):
    for part in (context.custom_attributes or "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "case":
            return value
    return "describe"


def input_handler(data, context):
    body = data.read()
    case = _case(context)
    if case == "form":
        return {"instances": "1.0"}  # form-encoded, as requests.post(data=dict) would
    if case == "str":
        return body.decode()
    if case == "file":
        return io.BytesIO(body)
    if case == "raise-in-input":
        raise ValueError("cannot read that")
    return body


def output_handler(response, context):
    case = _case(context)
    if case == "raise":  # what the original container's examples do
        raise ValueError(f"model server answered {response.status_code}")
    if case == "handler-error":
        raise HandlerError(422, "the model refused it")
    described = {
        "class": f"{type(response).__module__}.{type(response).__name__}",
        "is_requests_response": isinstance(response, requests.Response),
        "status_code": response.status_code,
        "ok": response.ok,
        "json": response.json(),
        "text": response.text,
        "content_type": response.headers["content-type"],
        "url": response.url,
    }
    return json.dumps(described), "application/json"
"""

# the default codecs as a pair
DEFAULTS_SCRIPT = """
from sagemaker_tfs.codecs import default_input_handler as input_handler
from sagemaker_tfs.codecs import default_output_handler as output_handler
"""
