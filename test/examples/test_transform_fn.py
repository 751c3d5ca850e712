"""transform_fn (seed 004): model_fn + transform_fn, the MXNet-era interface, on a linear model without a
SavedModel; JSON and CSV both ways, the script's own error status, and a Batch Transform of a CSV file."""

from __future__ import annotations

import json

import numpy as np
import pytest
from examples_support import build_module
from sagemaker_tfs.testing import Endpoint
from sagemaker_tfs.transform import transform
from serve_stack import Stack


@pytest.fixture(scope="module")
def build():
    return build_module("transform_fn")


@pytest.fixture(scope="module")
def example(packaged):
    return packaged("transform_fn")


@pytest.fixture(scope="module")
def stack(example):
    with Stack(example.model_dir) as stack:
        yield stack


@pytest.fixture(scope="module")
def endpoint(example):
    with Endpoint(example.model_dir) as endpoint:  # the app in this process (sagemaker_tfs.testing)
        yield endpoint


@pytest.fixture(scope="module")
def rows_and_expected(build, example):
    rows, _ = build.held_out()
    spec = json.loads((example.export_dir / "model.json").read_text())
    return rows, (rows @ np.array(spec["coefficients"]) + spec["intercept"]).round(3).tolist()


def as_csv(rows: np.ndarray) -> str:
    return "".join(",".join(map(repr, row)) + "\n" for row in rows.tolist())


def test_the_held_out_rows_predict_within_the_model_s_error(build, rows_and_expected):
    _, targets = build.held_out()
    rows, expected = rows_and_expected
    assert np.sqrt(np.mean((np.array(expected) - targets) ** 2)) < 60  # the target's spread is 77


def test_json_rows_and_a_tfs_style_request(endpoint, rows_and_expected):
    rows, expected = rows_and_expected
    answer = endpoint.invoke(json.dumps(rows.tolist()), "application/json")
    assert (answer.status, answer.content_type) == (200, "application/json")
    assert answer.json() == {"predictions": expected}
    answer = endpoint.invoke(json.dumps({"instances": rows[:3].tolist()}), "application/json")
    assert answer.json() == {"predictions": expected[:3]}


def test_csv_in_csv_out(endpoint, rows_and_expected):
    rows, expected = rows_and_expected
    answer = endpoint.invoke(as_csv(rows), "text/csv", accept="text/csv")
    assert (answer.status, answer.content_type) == (200, "text/csv")
    assert answer.text == "\n".join(map(str, expected))


def test_another_type_gets_the_script_s_status(endpoint):
    answer = endpoint.invoke("<rows/>", "application/xml")
    assert (answer.status, answer.json()) == (
        415,
        {"error": "send JSON or CSV rows of 10 features, not application/xml"},
    )


def test_a_row_of_the_wrong_width_is_a_500_with_numpy_s_message(endpoint):
    answer = endpoint.invoke("[[1, 2, 3]]", "application/json")
    assert (answer.status, answer.json()) == (500, {"error": "cannot reshape array of size 3 into shape (10)"})


def test_batch_transform_of_a_csv_file(stack, rows_and_expected, tmp_path):
    rows, expected = rows_and_expected
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "rows.csv").write_text(as_csv(rows))
    description = transform(
        stack.url,
        data=str(tmp_path / "in"),
        output_path=str(tmp_path / "out"),
        content_type="text/csv",
        accept="text/csv",
        split_type="Line",
        strategy="MultiRecord",
        max_payload=1,
        assemble_with="Line",
    )
    assert description["TransformJobStatus"] == "Completed"
    assert (tmp_path / "out" / "rows.csv.out").read_text() == "".join(f"{p}\n" for p in expected)
