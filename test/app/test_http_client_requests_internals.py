"""model_client/http_client.py builds its answers as `requests.Response` objects through requests' internals
(`ModelServerResponse`: `Response.__new__` without `__init__`, the attributes `__init__` would set, `_content` and
`_content_consumed`, `CaseInsensitiveDict._store`, and the cookie jar's attributes as CookieJar.__init__ sets them;
the headers, cookie jar, elapsed time and encoding made when first read). These tests fail, naming what changed,
when the installed requests no longer works that way, or when `ModelServerResponse` starts using an internal they do
not guard. The answers are parsed from raw HTTP by the client's own reader.

pyproject.toml pins requests to the releases these tests passed on: 2.32.2 to 2.32.5, 2.33.0, 2.33.1, 2.34.0 to
2.34.2 (each installed in turn, the tests run against it). A new release: run them against it, then widen the pin.
"""

from __future__ import annotations

import inspect
import io
import pickle
import re

import pytest
import requests
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers
from sagemaker_tfs.model_client import http_client
from sagemaker_tfs.model_client.http_client import Connection, ModelServerResponse

# The private names of requests that ModelServerResponse uses, each guarded below; and its own.
GUARDED = {"_content", "_content_consumed", "_next", "_store", "_policy", "_cookies", "_cookies_lock"}
OWN = set(ModelServerResponse.__slots__)
LAZY = {"headers", "cookies", "elapsed", "encoding"}

URL = "http://127.0.0.1:8501/v1/models/m:predict"
BODY = b'{"predictions": [3.5, 4.0]}\n{"more": true}'


def built(
    headers=(("Content-Type", "application/json"), ("X-Repeated", "a"), ("x-repeated", "b")),
    content=BODY,
    status=200,
    reason="OK",
):
    """The client's response to this answer, read by its own reader from the raw bytes."""
    connection = Connection(1)
    connection.sock = object()  # not read: the whole answer is in the buffer
    lines = "".join(f"{name}: {value}\r\n" for name, value in headers)
    connection._buffer = (
        f"HTTP/1.1 {status} {reason}\r\n{lines}Content-Length: {len(content)}\r\n\r\n".encode("latin-1") + content
    )
    status, reason, head, content_type, content = connection._read_answer("POST")
    return ModelServerResponse.of(status, reason, head, content_type, content, URL, 0.25)


def test_every_internal_the_client_uses_is_guarded():
    source = inspect.getsource(ModelServerResponse).split(":", 1)[1]  # the body, not the class's own name
    used = set(re.findall(r"\b_[a-z]\w*", source)) - OWN
    assert used == GUARDED, (
        f"ModelServerResponse uses requests internals no test guards: "
        f"{sorted(used - GUARDED)}; or no longer uses {sorted(GUARDED - used)}"
    )
    assert "requests.Response.__new__(" in inspect.getsource(http_client)


def test_the_response_has_every_attribute_response_init_sets_and_no_other():
    made = vars(requests.Response())
    response = built()
    assert set(made) - set(vars(response)) == LAZY  # made when first read
    for name in LAZY:
        getattr(response, name)
    ours = vars(response)
    assert set(ours) == set(made), (
        f"requests {requests.__version__}: Response.__init__ now sets "
        f"{sorted(set(made) - set(ours))} and no longer {sorted(set(ours) - set(made))}"
    )
    for name in ("headers", "cookies", "elapsed", "history"):
        assert type(ours[name]) is type(made[name]), f"requests {requests.__version__}: Response.{name}"
    assert isinstance(response, requests.Response)
    with pytest.raises(AttributeError, match="'ModelServerResponse' object has no attribute 'other'"):
        response.other


def test_the_headers_and_the_cookie_jar_are_made_as_their_init_makes_them():
    ours, made = built(), requests.Response()
    for name in ("headers", "cookies"):
        assert {key: type(value) for key, value in vars(getattr(ours, name)).items()} == {
            key: type(value) for key, value in vars(getattr(made, name)).items()
        }, f"requests {requests.__version__}: {type(getattr(made, name)).__name__}.__init__ sets other attributes"
    assert ours.cookies.get_policy() is not built().cookies.get_policy()  # each answer has its own
    ours.cookies.set("a", "b")
    assert ours.cookies.get_dict() == {"a": "b"} and len(built().cookies) == 0


def test_a_body_given_as_consumed_content_is_what_every_reader_of_the_response_gets():
    response = built()
    assert response.content == BODY
    assert response.text == BODY.decode()
    assert b"".join(response.iter_content(5)) == BODY
    assert b"".join(response.iter_content(None)) == BODY
    assert list(response.iter_lines()) == BODY.split(b"\n")
    with pytest.raises(requests.exceptions.JSONDecodeError):  # two documents: requests' own error
        response.json()
    assert built(content=b'{"a": 1}').json() == {"a": 1}
    assert response.ok and response.status_code == 200 and response.reason == "OK" and response.url == URL
    assert response.raw is None and response.next is None and response.history == [] and response.request is None
    assert response.elapsed.total_seconds() == 0.25 and not response.is_redirect and response.links == {}
    assert len(response.cookies) == 0
    assert repr(response) == "<Response [200]>"
    response.close()
    with built() as again:
        assert again.content == BODY


def test_an_error_status_raises_as_requests_raises_it():
    response = built(status=404, reason="Not Found", content=b'{"error": "no model"}')
    assert not response.ok
    with pytest.raises(requests.HTTPError, match="404 Client Error: Not Found for url: " + re.escape(URL)) as raised:
        response.raise_for_status()
    assert raised.value.response is response


def test_the_response_pickles_with_its_body_and_headers():
    response = pickle.loads(pickle.dumps(built()))
    assert response.content == BODY and response.headers["x-repeated"] == "a, b" and response.status_code == 200
    assert response.encoding == "utf-8" and response.elapsed.total_seconds() == 0.25


def test_headers_filled_through_the_store_read_as_requests_fills_them():
    # What ModelServerResponse writes into CaseInsensitiveDict._store, and what __setitem__ writes there itself.
    table = CaseInsensitiveDict()
    table["Content-Type"] = "text/csv"
    assert dict(table._store) == {"content-type": ("Content-Type", "text/csv")}, (
        f"requests {requests.__version__}: CaseInsensitiveDict no longer keeps (name, value) by the lower-case name"
    )
    headers = built().headers
    assert headers["content-type"] == headers.get("CONTENT-TYPE") == "application/json"
    assert headers["X-REPEATED"] == "a, b"  # repeated headers joined, first spelling kept, as urllib3 does
    length = str(len(BODY))
    assert list(headers) == ["Content-Type", "X-Repeated", "Content-Length"] and len(headers) == 3
    assert list(headers.lower_items()) == [
        ("content-type", "application/json"),
        ("x-repeated", "a, b"),
        ("content-length", length),
    ]
    assert headers == {"content-type": "application/json", "x-repeated": "a, b", "content-length": length}
    copied = headers.copy()
    copied["New"] = "1"
    assert "new" in copied and "new" not in headers
    assert dict(headers) == {"Content-Type": "application/json", "X-Repeated": "a, b", "Content-Length": length}


@pytest.mark.parametrize(
    "content_type, encoding",
    [
        (
            "application/json",
            "utf-8",
        ),  # ModelServerResponse's short cut for the model server's own type: requests' rule
        ("text/plain", "ISO-8859-1"),
        ("text/csv; charset=utf-16", "utf-16"),
        ("application/octet-stream", None),
    ],
)
def test_the_encoding_is_requests_rule(content_type, encoding):
    assert get_encoding_from_headers(CaseInsensitiveDict({"Content-Type": content_type})) == encoding
    assert built(headers=[("Content-Type", content_type)]).encoding == encoding


def test_a_response_with_no_content_type_reads_as_requests_reads_it():
    response = built(headers=[], content="é".encode())
    assert response.encoding is None and response.text == "é"  # decoded by guessing, as requests does
    assert response.headers == {"Content-Length": "2"} and isinstance(io.BytesIO(response.content).read(), bytes)
