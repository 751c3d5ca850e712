"""Price quotations sent as JSON or as `;`-separated latin-1 CSV, and answer each price with its quotation id.

JSON (application/json): {"instances": [{"quotation_id": 100007527745, "year": "2019", "month": "01",
"stage_id": 1, "company_id": 2, "product_modality_id": 2, "cover_3": 1, "province": "Cádiz"}, ...]}
(or the bare list) -> {"predictions": [[100007527745, 621.25], ...]}

CSV (text/csv), no header, one quotation per line, the columns in COLUMNS order:
    100007527745;2019;01;1;2;2;1;Cádiz
-> one `id,price` line per quotation, in order, so that Batch Transform with SplitType=Line and
AssembleWith=Line writes one output line per input line:
    100007527745,621.25
The id goes around the model: the handler keeps it and zips it with the predictions, which the model server
returns in request order.
"""

import csv
import io
import json

import requests
from sagemaker_tfs import HandlerError
from sagemaker_tfs.codecs import media_type

COLUMNS = ("quotation_id", "year", "month", "stage_id", "company_id", "product_modality_id", "cover_3", "province")
INTEGERS = ("year", "month", "stage_id", "company_id", "product_modality_id", "cover_3")

session = requests.Session()  # keeps the connection to the model server open between requests


def handler(data, context):
    kind = media_type(context.request_content_type)
    if kind == "text/csv":
        quotes = csv_quotes(data.read())
    elif kind == "application/json":
        quotes = json_quotes(data.read())
    else:
        raise HandlerError(415, f"send application/json or text/csv, not {context.request_content_type}")
    ids = [quote.pop("quotation_id") for _, quote in quotes]
    instances = [features(quote, where) for where, quote in quotes]
    response = session.post(context.rest_uri, json={"instances": instances}, timeout=context.timeout)
    if response.status_code != 200:
        raise HandlerError(response.status_code, response.json()["error"])
    prices = response.json()["predictions"]
    if kind == "text/csv":
        # No newline after the last line: Batch Transform's AssembleWith=Line adds one after each answer.
        return "\n".join(f"{id_},{price}" for id_, price in zip(ids, prices, strict=True)), "text/csv"
    predictions = [[id_, price] for id_, price in zip(ids, prices, strict=True)]
    return json.dumps({"predictions": predictions}), "application/json"


def csv_quotes(body: bytes) -> list[tuple[str, dict]]:
    """(where, quotation) for each non-blank line of a latin-1, `;`-separated CSV body."""
    quotes = []
    reader = csv.reader(io.StringIO(body.decode("latin-1"), newline=""), delimiter=";")
    for fields in reader:
        if not fields:
            continue  # a blank line
        where = f"CSV line {reader.line_num}"
        if len(fields) != len(COLUMNS):
            raise HandlerError(400, f"{where} has {len(fields)} fields; expected {len(COLUMNS)}: {';'.join(COLUMNS)}")
        quotes.append((where, dict(zip(COLUMNS, fields, strict=True))))
    return quotes


def json_quotes(body: bytes) -> list[tuple[str, dict]]:
    """(where, quotation) for each instance of a JSON body."""
    try:
        request = json.loads(body)
    except ValueError as exc:
        raise HandlerError(400, f"the request body is not JSON: {exc}") from None
    instances = request.get("instances") if isinstance(request, dict) else request
    if not isinstance(instances, list) or not all(isinstance(i, dict) for i in instances):
        raise HandlerError(400, 'send {"instances": [{"quotation_id": ..., "year": ..., ...}, ...]}')
    for index, instance in enumerate(instances):
        missing = [column for column in COLUMNS if column not in instance]
        if missing:
            raise HandlerError(400, f"instance {index} has no {', '.join(missing)}")
    return [(f"instance {index}", dict(instance)) for index, instance in enumerate(instances)]


def features(quote: dict, where: str) -> dict:
    """The model's inputs for one quotation: the integer columns as numbers (the CSV and the seed's JSON have
    "2019" and "01"), the province as text."""
    inputs = {"province": str(quote["province"])}
    for column in INTEGERS:
        try:
            inputs[column] = int(quote[column])
        except (TypeError, ValueError):
            raise HandlerError(400, f"{where}: {column} must be an integer, not {quote[column]!r}") from None
    return inputs
