"""csv_with_ids (seed 002): quotations as JSON or latin-1 `;`-separated CSV; each price comes back with its
quotation id, in order; also as a Batch Transform over a CSV file."""

import json

import numpy as np
import pytest
from clients import invoke
from examples_support import EXAMPLES, build_module
from sagemaker_tfs.transform import transform
from serve_stack import Stack

SAMPLES = EXAMPLES / "csv_with_ids" / "samples"
COLUMNS = ("quotation_id", "year", "month", "stage_id", "company_id", "product_modality_id", "cover_3", "province")
TOLERANCE = 5.0  # the training prices have noise (sd 10); the fitted model is within about 1 of the formula


@pytest.fixture(scope="module")
def build():
    return build_module("csv_with_ids")


@pytest.fixture(scope="module")
def stack(packaged):
    with Stack(packaged("csv_with_ids").model_dir) as stack:
        yield stack


@pytest.fixture(scope="module")
def quotes(build):
    """60 quotations with distinct ids, in the seed's JSON style: year and month as zero-padded strings."""
    rng = np.random.default_rng(1)
    return [
        {
            "quotation_id": int(quotation_id),
            "year": str(rng.integers(2017, 2021)),
            "month": f"{rng.integers(1, 13):02d}",
            "stage_id": int(rng.integers(1, 4)),
            "company_id": int(rng.integers(1, 5)),
            "product_modality_id": int(rng.integers(1, 9)),
            "cover_3": int(rng.integers(0, 2)),
            "province": str(rng.choice(build.PROVINCES)),
        }
        for quotation_id in rng.choice(np.arange(100_000_000_000, 100_010_000_000), 60, replace=False)
    ]


def as_csv(quotes: list[dict], line_end: str = "\n") -> bytes:
    return "".join(";".join(str(q[c]) for c in COLUMNS) + line_end for q in quotes).encode("latin-1")


def true_price(build, quote: dict) -> float:
    return build.true_price({**quote, "year": int(quote["year"]), "month": int(quote["month"])})


def csv_answer(text: str) -> list[tuple[str, float]]:
    return [(id_, float(price)) for id_, price in (line.split(",") for line in text.split("\n"))]


def test_json_sample(stack, build):
    sample = json.loads((SAMPLES / "quotes.json").read_text())["instances"]
    response = invoke(stack, (SAMPLES / "quotes.json").read_bytes(), "application/json")
    assert response.status == 200
    assert response.content_type == "application/json"
    predictions = response.json()["predictions"]
    assert [id_ for id_, _ in predictions] == [100007527745, 100006042938]
    for (_, price), quote in zip(predictions, sample, strict=True):
        assert price == pytest.approx(true_price(build, quote), abs=TOLERANCE)


def test_csv_sample_is_latin_1_with_accents(stack):
    body = (SAMPLES / "quotes.csv").read_bytes()
    assert "Cádiz".encode("latin-1") in body
    response = invoke(stack, body, "text/csv")
    assert response.status == 200
    assert [id_ for id_, _ in csv_answer(response.text)] == [line.split(b";")[0].decode() for line in body.splitlines()]


def test_json_predictions_are_ids_and_prices_in_order(stack, build, quotes):
    response = invoke(stack, json.dumps({"instances": quotes}).encode(), "application/json")
    assert response.status == 200
    predictions = response.json()["predictions"]
    assert [id_ for id_, _ in predictions] == [q["quotation_id"] for q in quotes]
    for (_, price), quote in zip(predictions, quotes, strict=True):
        assert price == pytest.approx(true_price(build, quote), abs=TOLERANCE)


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_csv_gets_one_id_price_line_per_line_with_the_json_prices(stack, quotes, line_end):
    response = invoke(stack, as_csv(quotes, line_end), "text/csv")
    assert response.status == 200
    assert response.content_type == "text/csv"
    json_answer = invoke(stack, json.dumps(quotes).encode(), "application/json").json()["predictions"]
    assert csv_answer(response.text) == [(str(id_), price) for id_, price in json_answer]


def test_the_province_reaches_the_model_with_its_accents(stack, build, quotes):
    """Decoded as anything but latin-1, León would be an unknown province and lose its surcharge."""
    quote = {**quotes[0], "province": "León"}
    ((_, leon),) = csv_answer(invoke(stack, as_csv([quote]), "text/csv").text)
    ((_, madrid),) = csv_answer(invoke(stack, as_csv([{**quote, "province": "Madrid"}]), "text/csv").text)
    assert leon == pytest.approx(true_price(build, quote), abs=TOLERANCE)
    assert madrid - leon == pytest.approx(
        build.PROVINCE_SURCHARGE["Madrid"] - build.PROVINCE_SURCHARGE["León"], abs=TOLERANCE
    )


@pytest.mark.parametrize(
    "body, error",
    [
        (
            b"100007527745;2019;01;1;2;2;1;C\xe1diz\n100006042938;20x8;04;3;3;7;0;Madrid\n",
            "CSV line 2: year must be an integer, not '20x8'",
        ),
        (
            b"100007527745;2019;01;1;2;2;1;C\xe1diz\n\n100006042938;2018;04;3;3;7\n",
            "CSV line 3 has 6 fields; expected 8: quotation_id;year;month;stage_id;company_id;product_modality_id;"
            "cover_3;province",
        ),
    ],
)
def test_a_bad_csv_line_gets_400_naming_it(stack, body, error):
    response = invoke(stack, body, "text/csv")
    assert response.status == 400
    assert response.json() == {"error": error}


def test_a_json_instance_without_a_column_gets_400(stack, quotes):
    incomplete = {key: value for key, value in quotes[1].items() if key != "cover_3"}
    response = invoke(stack, json.dumps([quotes[0], incomplete]).encode(), "application/json")
    assert response.status == 400
    assert response.json() == {"error": "instance 1 has no cover_3"}


def test_other_content_types_get_415(stack):
    response = invoke(stack, b"<quotes/>", "application/xml")
    assert response.status == 415
    assert response.json() == {"error": "send application/json or text/csv, not application/xml"}


def test_batch_transform_of_a_csv_file_writes_one_line_per_quotation(packaged, stack, quotes, tmp_path):
    inputs, outputs = tmp_path / "input", tmp_path / "output"
    inputs.mkdir()
    (inputs / "quotes.csv").write_bytes(as_csv(quotes))
    (inputs / "sample.csv").write_bytes((SAMPLES / "quotes.csv").read_bytes())
    description = transform(
        str(packaged("csv_with_ids").archive),
        data=str(inputs),
        output_path=str(outputs),
        content_type="text/csv",
        accept="text/csv",
        split_type="Line",
        strategy="MultiRecord",
        assemble_with="Line",
    )
    assert description["TransformJobStatus"] == "Completed", description.get("FailureReason")
    lines = (outputs / "quotes.csv.out").read_text().split("\n")
    assert [line.split(",")[0] for line in lines] == [str(q["quotation_id"]) for q in quotes] + [""]
    for name in ("quotes.csv", "sample.csv"):
        endpoint_answer = invoke(stack, (inputs / name).read_bytes(), "text/csv").text
        assert (outputs / f"{name}.out").read_text() == endpoint_answer + "\n"
