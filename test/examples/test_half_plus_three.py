"""half_plus_three: the quick start's model (y = 0.5 * x + 3) served with the default handler, no code/."""

import pytest
from clients import invoke
from examples_support import EXAMPLES
from serve_stack import Stack

SAMPLES = EXAMPLES / "half_plus_three" / "samples"


@pytest.fixture(scope="module")
def stack(packaged):
    with Stack(packaged("half_plus_three").model_dir) as stack:
        yield stack


def test_the_archive_holds_the_version_folder_only(packaged):
    assert sorted(p.name for p in packaged("half_plus_three").model_dir.iterdir()) == ["1"]


def test_json_sample(stack):
    response = invoke(stack, (SAMPLES / "instances.json").read_bytes())
    assert response.status == 200
    assert response.json() == {"predictions": [3.5, 4.0, 5.5]}


def test_csv_sample_answers_one_line_per_row(stack):
    response = invoke(stack, (SAMPLES / "instances.csv").read_bytes(), "text/csv", Accept="text/csv")
    assert (response.status, response.content_type) == (200, "text/csv")
    assert response.text == "3.5\n4.0\n5.5"
