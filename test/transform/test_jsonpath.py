"""SageMaker's JSONPath subset: what each supported form selects, and the forms refused before a job runs."""

import pytest
from sagemaker_tfs.transform.jsonpath import JsonPathError, JsonPathSyntaxError, compile_path

DOC = {"id": "a", "features": [1, 2, 3, 4], "f": {"c1": 1, "c2": 2, "c3": 3}, "SageMakerOutput": {"sum": 3}}
ROW = ["id1", "1", "2", "3"]


@pytest.mark.parametrize(
    "path, document, expected",
    [
        ("$", DOC, DOC),
        ("$.id", DOC, "a"),
        ("$['id']", DOC, "a"),
        ("$.features[0]", DOC, 1),
        ("$.features[-1]", DOC, 4),
        ("$['id','SageMakerOutput']", DOC, {"id": "a", "SageMakerOutput": {"sum": 3}}),
        ("$.f.['c1','c2']", DOC, {"c1": 1, "c2": 2}),
        ("$.f['c1','c2']", DOC, {"c1": 1, "c2": 2}),
        ("$.f.*", DOC, [1, 2, 3]),
        ("$.features[*]", DOC, [1, 2, 3, 4]),
        ("$[1:]", ROW, ["1", "2", "3"]),
        ("$[:2]", ROW, ["id1", "1"]),
        ("$[1:3]", ROW, ["1", "2"]),  # exclusive end, as Jayway JsonPath
        ("$[0,-1]", ROW, ["id1", "3"]),
        ("$[0,2:]", ROW, ["id1", "2", "3"]),  # one index and one range: the API reference's example
        ("$[3,0]", ROW, ["3", "id1"]),
        ("$[*].x", [{"x": 1}, {"y": 2}, {"x": 3}], [1, 3]),  # indefinite: missing members are skipped
    ],
)
def test_selection(path, document, expected):
    assert compile_path(path).apply(document) == expected


def test_inclusive_slice_end_switch():
    assert compile_path("$[1:3]", inclusive_slice_end=True).apply(ROW) == ["1", "2", "3"]
    assert compile_path("$[1:-1]", inclusive_slice_end=True).apply(ROW) == ["1", "2", "3"]


@pytest.mark.parametrize(
    "path, message",
    [
        (
            "$[0:2,246:]",
            "Invalid JsonPath: $[0:2,246:]: only single range filters of format (eg: [1:5]) are "
            "supported. Format [0:2,246:] is not supported",
        ),
        ("$.f.['c1','c2.g']", "nested paths are not supported inside brackets"),
        ("features", "a path must start with $"),
        ("$..id", "recursive descent"),
        ("$[?(@.id)]", "is not a supported selector"),
        ("$." + "a" * 62, "longer than 63 characters"),
        ("$[0", "unclosed ["),
    ],
)
def test_unsupported_forms_are_refused(path, message):
    with pytest.raises(JsonPathSyntaxError) as error:
        compile_path(path)
    assert message in str(error.value)


@pytest.mark.parametrize(
    "path, document, message",
    [
        ("$[5]", ROW, "index 5 is out of range for 4 elements"),
        ("$.missing", DOC, "no member 'missing'"),
        ("$.id", ROW, "expected an object, found an array"),
        ("$[0]", DOC, "expected an array, found an object"),
    ],
)
def test_paths_that_do_not_fit_a_record_fail_that_record(path, document, message):
    with pytest.raises(JsonPathError, match=message):
        compile_path(path).apply(document)


def test_an_index_out_of_range_among_several_is_skipped_not_an_error():
    """Several indexes make the path indefinite: a missing element is skipped, as for a slice (fuzz/corpus/jsonpath/
    finding-several-indexes-out-of-range); a single index out of range stays the record's error."""
    assert compile_path("$[3,0]").apply(["a", "b", "c"]) == ["a"]
    assert compile_path("$[0,5].x").apply([{"x": 1}]) == [1]
    assert compile_path("$[*][5]").apply([[1], [1, 2, 3, 4, 5, 6]]) == [6]
    with pytest.raises(JsonPathError, match=r"^\$\[5\]: index 5 is out of range for 3 elements$"):
        compile_path("$[5]").apply(["a", "b", "c"])
