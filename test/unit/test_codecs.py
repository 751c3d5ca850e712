"""The default handler's conversions (sagemaker_tfs.codecs): every documented rule, exact outputs and errors."""

from __future__ import annotations

import io
import json
import random
from types import SimpleNamespace

import pytest
import requests
from sagemaker_tfs import HandlerError, codecs
from sagemaker_tfs.codecs import CSV, JSON
from sagemaker_tfs.shared.media_types import JSON_LINES as JSONLINES
from sagemaker_tfs.shared.media_types import JSONS


def request(body: str | bytes, content_type: str | None = JSON) -> bytes:
    return codecs.tfs_request(body.encode() if isinstance(body, str) else body, content_type)


def request_error(body: str | bytes, content_type: str | None = JSON) -> tuple[int, str]:
    with pytest.raises(HandlerError) as error:
        request(body, content_type)
    return error.value.status, error.value.message


def instances(body: str, content_type: str) -> list:
    return json.loads(request(body, content_type))["instances"]


# ---- content types ----


@pytest.mark.parametrize(
    "content_type, media",
    [
        ("application/json", JSON),
        ("Application/JSON; charset=utf-8", JSON),
        (" text/csv ;header=present", CSV),
        (None, ""),
        ("", ""),
    ],
)
def test_media_type(content_type, media):
    assert codecs.media_type(content_type) == media


def test_unsupported_content_type_is_415_naming_it():
    assert request_error("x", "application/x-image") == (
        415,
        "unsupported content type 'application/x-image': the default input handler reads application/json, "
        "application/jsonlines, application/jsons, application/x-jsonlines, application/jsonl, text/csv, "
        "application/x-npy (a code/inference.py script can read others)",
    )


@pytest.mark.parametrize("content_type", [None, "", "APPLICATION/JSON;charset=UTF-8"])
def test_no_content_type_or_parameters_mean_json(content_type):
    assert request("[[1]]", content_type) == b'{"instances": [[1]]}'


# ---- JSON ----


@pytest.mark.parametrize(
    "body",
    [
        '{"instances": [1.0, 2.0]}',
        '{"signature_name": "s", "inputs": {"x": [[1]]}}',
        '{"examples": [{"x": 1}], "context": {"y": 2}}',
        '  {"instances":[1e3,  NaN]}\n',
    ],
)
def test_a_tfs_request_passes_byte_for_byte(body):
    assert request(body) == body.encode()


@pytest.mark.parametrize(
    "body, expected",
    [
        ("[[1, 2], [3, 4]]", b'{"instances": [[1, 2], [3, 4]]}'),
        (" [\n [1], [2]]", b'{"instances":  [\n [1], [2]]}'),
        ("[[]]", b'{"instances": [[]]}'),
    ],
)
def test_a_list_of_lists_is_the_instances(body, expected):
    assert request(body) == expected


@pytest.mark.parametrize(
    "body, expected",
    [
        ("[1.0, 2.0, 5.0]", b'{"instances": [[1.0, 2.0, 5.0]]}'),  # one instance, as in the original container
        ("[1, [2]]", b'{"instances": [[1, [2]]]}'),
        ('[{"x": 1}, {"x": 2}]', b'{"instances": [[{"x": 1}, {"x": 2}]]}'),
        ("[]", b'{"instances": [[]]}'),
        ("1.5", b'{"instances": [1.5]}'),
        ('"text"', b'{"instances": ["text"]}'),
        ('{"x": 1, "y": [2]}', b'{"instances": [{"x": 1, "y": [2]}]}'),
        ("null", b'{"instances": [null]}'),
    ],
)
def test_any_other_json_value_is_one_instance(body, expected):
    assert request(body) == expected


def test_a_utf8_bom_is_dropped():
    assert request(b'\xef\xbb\xbf{"instances": ["\xc3\xa9"]}') == '{"instances": ["é"]}'.encode()


@pytest.mark.parametrize(
    "body, message",
    [
        (b"", "the request body is empty"),
        (b" \r\n\t", "the request body is empty"),
        (b"[1, \xff]", "the request body is not UTF-8 text: invalid byte at position 4"),
        (b"[1, 2", "the request body is not valid JSON: Expecting ',' delimiter: line 1 column 6 (char 5)"),
        (
            b"{'a': 1}",
            "the request body is not valid JSON: Expecting property name enclosed in double quotes: line 1 "
            "column 2 (char 1)",
        ),
        (b"[1] x", "JSON lines: line 1 is not one JSON value: Extra data at column 5"),
    ],
)
def test_invalid_json_is_400_naming_the_problem(body, message):
    assert request_error(body) == (400, message)


def test_integers_longer_than_pythons_limit_are_copied_as_written():
    digits = "7" * 5000  # beyond int()'s 4300 digits: still valid JSON, for the model server to read
    assert request(f"[[{digits}]]") == f'{{"instances": [[{digits}]]}}'.encode()
    assert request(f"-{digits}\n[1]", JSONLINES) == f'{{"instances": [-{digits}, [1]]}}'.encode()
    assert request(f"+{digits},00{digits}\n", CSV) == f'{{"instances": [[{digits}, {digits}]]}}'.encode()
    assert request_error(f"{digits} x", JSONLINES) == (
        400,
        "JSON lines: line 1 is not one JSON value: Extra data at column 5002",
    )


# deeper than any supported Python's json reads (3.13's reads 5,000 levels, 3.10 to 3.12 about 1,000)
@pytest.mark.parametrize(
    "body", ["[" * 100_000 + "]" * 100_000, '{"instances": ' + "[" * 100_000, "1\n" + "[" * 100_000]
)
@pytest.mark.parametrize("content_type", [JSON, JSONLINES])
def test_json_nested_too_deeply_is_400(body, content_type):
    assert request_error(body, content_type) == (
        400,
        "the request body's JSON nests arrays and objects too deeply to be read",
    )


def test_line_separated_json_under_application_json_is_json_lines():
    assert request('{"x": 1}\n{"x": 2}\n') == b'{"instances": [{"x": 1}, {"x": 2}]}'
    assert (
        request('{"instances": [1]}\n{"instances": [2]}') == b'{"instances": [{"instances": [1]}, {"instances": [2]}]}'
    )
    assert request_error('{"x": 1}\n{"x": \n') == (
        400,
        "JSON lines: line 2 is not one JSON value: Expecting value at column 6",
    )


# ---- JSON lines ----


@pytest.mark.parametrize("content_type", [JSONLINES, JSONS, "application/JSONLines; charset=utf-8"])
def test_json_lines_each_line_is_an_instance(content_type):
    assert (
        request('{"x": [1, 2]}\r\n"s"\n\n  [3]  \n4\n', content_type) == b'{"instances": [{"x": [1, 2]}, "s", [3], 4]}'
    )


def test_json_lines_of_numbers():
    assert request("1\n-2.5e3\n3\n", JSONLINES) == b'{"instances": [1,-2.5e3,3]}'
    assert request("1\nNaN\n", JSONLINES) == b'{"instances": [1, NaN]}'


def test_a_single_json_line_with_an_instances_key_is_one_instance():
    assert request('{"instances": [1]}\n', JSONLINES) == b'{"instances": [{"instances": [1]}]}'


@pytest.mark.parametrize(
    "body, message",
    [
        ("1\n2 3\n", "JSON lines: line 2 is not one JSON value: Extra data at column 3"),
        ('[1]\n\n{"a": }\n', "JSON lines: line 3 is not one JSON value: Expecting value at column 7"),
        ("[1,\n2]\n", "JSON lines: line 1 is not one JSON value: Expecting value at column 4"),
        ("\n\n", "the request body is empty"),
    ],
)
def test_invalid_json_lines_are_400_naming_the_line(body, message):
    assert request_error(body, JSONLINES) == (400, message)


# ---- CSV ----


@pytest.mark.parametrize(
    "body, expected",
    [
        ("1.0\n2.0", b'{"instances": [1.0,2.0]}'),
        ("1.0\r\n2.0\r\n", b'{"instances": [1.0,2.0]}'),
        ("1,2,3", b'{"instances": [[1,2,3]]}'),
        ("1,2,3\n4,5,6\n\n", b'{"instances": [[1,2,3],[4,5,6]]}'),
        ("1, 2.50 ,-3e-2\r\n", b'{"instances": [[1, 2.50 ,-3e-2]]}'),  # numbers keep their digits
    ],
)
def test_numeric_csv(body, expected):
    assert request(body, CSV) == expected


def test_csv_strings_quotes_and_line_breaks():
    body = 'a,"b,c","say ""hi""",\n"line\nbreak",é,"",x y\r\n'
    assert instances(body, CSV) == [["a", "b,c", 'say "hi"', ""], ["line\nbreak", "é", "", "x y"]]


def test_csv_single_column_of_strings_gives_scalar_instances():
    assert instances("cat\ndog\n", CSV) == ["cat", "dog"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("+1", 1),
        (".5", 0.5),
        ("007", 7),
        ("-007", -7),
        ("-000", 0),
        ("1.", 1.0),
        ("-0", 0),
        ("1E3", 1000.0),
        ('"2.5"', 2.5),
        (" 3 ", 3),
        ("1_000", "1_000"),
        ("0x10", "0x10"),
        ("1e", "1e"),
        ("", ""),
        ("true", "true"),
        ("-", "-"),
    ],
)
def test_csv_numbers_and_strings(field, value):
    assert instances(f"{field},x\n", CSV) == [[value, "x"]]


def test_csv_non_finite_numbers_are_tfs_tokens():
    assert request("nan,-inf,+Infinity,NaN,1e999\n", CSV) == b'{"instances": [[NaN, -Infinity, Infinity, NaN, 1e999]]}'
    assert request("+1,x\n", CSV) == b'{"instances": [[1, "x"]]}'


@pytest.mark.parametrize(
    "body, message",
    [
        ("1,2\n3\n", "CSV line 2 has 1 field(s) but line 1 has 2: every row must have the same number of fields"),
        (
            '\n\na,b\n"c",d,e\n',
            "CSV line 4 has 3 field(s) but line 3 has 2: every row must have the same number of fields",
        ),
        ('1,"2\n3\n', "CSV line 1 is not valid CSV: unexpected end of data"),
        ('x\n"a\nb",c\n', "CSV line 2 has 2 field(s) but line 1 has 1: every row must have the same number of fields"),
        (
            'x,y\n"a\nb",c\nd\n',
            "CSV line 4 has 1 field(s) but line 1 has 2: every row must have the same number of fields",
        ),
        ('1,"2"x\n', "CSV line 1 is not valid CSV: ',' expected after '\"'"),
        ("\r\n\r\n", "the request body is empty"),
    ],
)
def test_invalid_csv_is_400_naming_the_line(body, message):
    assert request_error(body, CSV) == (400, message)


def test_numeric_fast_path_and_general_path_agree():
    rng = random.Random(7)
    for _ in range(50):
        width = rng.randint(1, 4)
        rows = [
            [rng.choice(["0", "12", "-3.25", "1e-5", "4.0E+2"]) for _ in range(width)] for _ in range(rng.randint(1, 6))
        ]
        text = "\r\n".join(",".join(row) for row in rows) + rng.choice(["", "\n", "\r\n", "\n\n"])
        fast = codecs._numbers_only(text)
        assert fast is not None
        assert json.loads(fast) == json.loads(codecs._any_csv_instances(text))


# ---- NPY ----


def npy_body(header: str, data: bytes = b"", version: int = 1) -> bytes:
    length = len(header).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode() + data


NPY = "application/x-npy"


def test_npy_is_the_instances():
    body = npy_body("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", b"\0" * 8 + b"\0\0\0\0\0\0\xf0\x3f")
    assert request(body, NPY) == b'{"instances": [0.0, 1.0]}'


def _tokenize_eof() -> str:
    """What tokenize says of a header cut in a multi-line statement, on this Python."""
    import io
    import tokenize

    try:
        list(tokenize.generate_tokens(io.StringIO("{'a': (2,\n").readline))
    except tokenize.TokenError as exc:
        return str(exc)
    raise AssertionError("tokenize read an unfinished statement")


TOKENIZE_EOF = _tokenize_eof()


@pytest.mark.parametrize(
    "body, message",
    [
        (  # numpy's header reader lets tokenize's error out (fuzz/corpus/default_npy/finding-header-tokenize-error)
            npy_body("{'descr': '<f8', 'fortran_ordFalse, 'shape': (2,er': Fa", version=2),
            # tokenize's own words, which change between Pythons
            f"cannot read the NPY body: TokenError: {TOKENIZE_EOF}",
        ),
        (
            npy_body("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,), }"),
            "cannot read the NPY body: OverflowError: Python int too large to convert to C long",
        ),
    ],
)
def test_an_npy_header_numpy_cannot_read_is_400(body, message):
    assert request_error(body, NPY) == (400, message)


@pytest.mark.parametrize(
    "descr, shape, message",
    [
        ("<U0", "(1000000000,)", "its shape (1000000000,) of <U0 has 1000000000 elements"),
        ("<f4", "(1000000000, 0)", "its shape (1000000000, 0) of float32 has 1000000000 elements"),
    ],
)
def test_an_npy_body_of_more_elements_than_bytes_is_400(descr, shape, message):
    """Elements of no bytes (fuzz/corpus/default_npy/finding-*-billions): a few bytes would be billions of objects."""
    body = npy_body(f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}")
    assert request_error(body, NPY) == (
        400,
        f"cannot read the NPY body: {message} (empty axes counted as one) but the body has {len(body)} bytes",
    )
    assert request(npy_body(f"{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 0), }}"), NPY) in (
        b'{"instances": [[], []]}',
        b'{"instances": [["", ""]]}',
    )


# ---- the input handler ----


def test_default_input_handler_reads_the_stream_and_the_context():
    context = SimpleNamespace(request_content_type="text/csv", accept_header="application/json")
    assert codecs.default_input_handler(io.BytesIO(b"1\n2\n"), context) == b'{"instances": [1,2]}'
    assert codecs.default_input_handler(b"3", context) == b'{"instances": [3]}'


# ---- Accept ----


@pytest.mark.parametrize(
    "accept, media",
    [
        (None, JSON),
        ("", JSON),
        ("*/*", JSON),
        ("application/json", JSON),
        ("*", JSON),
        ("text/csv", CSV),
        ("TEXT/CSV; charset=utf-8", CSV),
        ("text/*", CSV),
        ("application/*", JSON),
        ("application/jsonlines", JSONLINES),
        ("application/jsons", JSONS),
        ("text/csv, application/json", CSV),
        ("application/json, text/csv", JSON),
        ("text/csv;q=0.5, application/json", JSON),
        ("text/csv;q=0.5, application/json;q=0.4", CSV),
        ("image/png, text/csv", CSV),
        ("application/xml, */*;q=0.1", JSON),
        ("application/json;q=0, */*", JSONLINES),
        ("text/csv;q=x", CSV),
        ("application/xml", None),
        ("text/csv;q=0", None),
        ("image/*", None),
    ],
)
def test_negotiate(accept, media):
    assert codecs.negotiate(accept) == media


def test_nothing_acceptable_is_406():
    with pytest.raises(HandlerError) as error:
        codecs.response_type("application/xml, text/html")
    assert (error.value.status, error.value.message) == (
        406,
        "none of the types in the Accept header 'application/xml, text/html' can be produced: the default "
        "output handler answers application/json, application/jsonlines, application/jsons, application/x-jsonlines, "
        "application/jsonl, text/csv, application/x-npy",
    )


@pytest.mark.parametrize(
    "accept, media",
    [
        (None, None),
        ("*/*", None),
        ("text/*, */*", None),
        ("text/plain", "text/plain"),
        ("text/plain;q=0.2, image/png", "image/png"),
        ("image/png;q=0, text/*, text/csv", "text/csv"),
    ],
)
def test_preferred_type(accept, media):
    assert codecs.preferred_type(accept) == media


# ---- responses ----


def tfs_answer(status: int, body: str) -> requests.Response:
    response = requests.Response()
    response.status_code, response.raw = status, io.BytesIO(body.encode())
    response.headers["Content-Type"] = "application/json"
    return response


def encode(body: str, media: str) -> bytes:
    return codecs.encode_predictions(body.encode(), media)


@pytest.mark.parametrize(
    "body, csv, jsonlines",
    [
        ('{"predictions": [3.5, 4.0, 1e-05]}', b"3.5\n4.0\n1e-05", b"3.5\n4.0\n1e-05"),
        ('{"predictions": [[3.5], [4.0]]}', b"3.5\n4.0", b"[3.5]\n[4.0]"),
        ('{"predictions": [[1, 2], [3, 4]]}', b"1,2\n3,4", b"[1,2]\n[3,4]"),
        ('{"predictions": [[[1], [2]], [[3], [4]]]}', b"1,2\n3,4", b"[[1],[2]]\n[[3],[4]]"),
        ('{"predictions": [[], [1]]}', b"\n1", b"[]\n[1]"),
        ('{"predictions": [[1], 2]}', b"1\n2", b"[1]\n2"),
        (
            '{"predictions": [NaN, Infinity, -Infinity, true, null]}',
            b"NaN\nInfinity\n-Infinity\ntrue\n",
            b"NaN\nInfinity\n-Infinity\ntrue\nnull",
        ),
        ('{"predictions": []}', b"", b""),
        (
            '{"predictions": [{"b": [1, 2], "a": "x,y"}, {"b": [3, 4], "a": "say \\"hi\\""}]}',
            b'"x,y",1,2\n"say ""hi""",3,4',
            b'{"b":[1,2],"a":"x,y"}\n{"b":[3,4],"a":"say \\"hi\\""}',
        ),
        ('{"predictions": ["caf\\u00e9", "a\\nb", ""]}', 'café\n"a\nb"\n'.encode(), '"café"\n"a\\nb"\n""'.encode()),
        ('{"outputs": [[3.5], [4.0]]}', b"3.5\n4.0", b"[3.5]\n[4.0]"),
        ('{"outputs": {"b": [1, 2], "a": [[3], [4]]}}', b"3,1\n4,2", b'{"b":1,"a":[3]}\n{"b":2,"a":[4]}'),
        ('{"outputs": {"a": 1, "b": [2]}}', b"1,2", b'{"a":1,"b":[2]}'),
        ('{"outputs": 2.5}', b"2.5", b"2.5"),
        ('{"results": [3.5, 4.0]}', b"3.5\n4.0", b"3.5\n4.0"),
        ('{"results": [[["", 12.0]], [["a", 3.0]]]}', b",12.0\na,3.0", b'[["",12.0]]\n[["a",3.0]]'),
        ('{"something": {"b64": "AAE="}}', b"AAE=", b'{"something":{"b64":"AAE="}}'),
        ("[1, 2]", b"1\n2", b"1\n2"),
    ],
)
def test_predictions_as_csv_and_json_lines(body, csv, jsonlines):
    assert encode(body, CSV) == csv
    assert encode(body, JSONLINES) == jsonlines


def test_default_output_handler():
    context = SimpleNamespace(accept_header="text/csv")
    assert codecs.default_output_handler(tfs_answer(200, '{"predictions": [1.5]}'), context) == (b"1.5", CSV)
    tfs_body = '{\n    "predictions": [1.5\n    ]\n}'
    context = SimpleNamespace(accept_header="*/*")
    assert codecs.default_output_handler(tfs_answer(200, tfs_body), context) == (tfs_body.encode(), JSON)


@pytest.mark.parametrize("accept", ["text/csv", "application/xml", "application/json"])
def test_a_model_server_error_passes_through_whatever_the_accept(accept):
    error = '{\n    "error": "Servable not found for request: Latest(x)"\n}'
    result = codecs.default_output_handler(tfs_answer(404, error), SimpleNamespace(accept_header=accept))
    assert result == (error.encode(), "application/json", 404)


def test_an_answer_that_is_not_json_is_an_error():
    with pytest.raises(ValueError, match="the model server's answer is not JSON"):
        codecs.encode_predictions(b"<html>", CSV)


# ---- large bodies (both directions are linear; timings are in scripts/, not here) ----


def test_a_3_mb_csv_both_ways():
    values = [f"{i % 997}.25" for i in range(750_000)]
    body = ("\n".join(values) + "\n").encode()
    assert len(body) > 3_000_000
    tfs_request = request(body, CSV)
    assert tfs_request == b'{"instances": [' + ",".join(values).encode() + b"]}"

    predictions = [float(v) * 2 for v in values]
    tfs_body = json.dumps({"predictions": predictions})
    assert encode(tfs_body, CSV) == "\n".join(map(repr, predictions)).encode()

    rows = [values[i : i + 3] for i in range(0, 750_000, 3)]
    wide = "\r\n".join(",".join(row) for row in rows).encode()
    assert json.loads(request(wide, CSV))["instances"][-1] == [float(v) for v in rows[-1]]
    lines = encode(json.dumps({"predictions": [[1.5, 2.0]] * 250_000}), JSONLINES)
    assert lines == b"\n".join([b"[1.5,2.0]"] * 250_000)


def test_a_large_csv_of_strings():
    body = "".join(f'"name, {i}",{i}\n' for i in range(100_000))
    result = instances(body, CSV)
    assert len(result) == 100_000 and result[-1] == ["name, 99999", 99999]
