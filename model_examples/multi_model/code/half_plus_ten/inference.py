"""half_plus_ten's own script: numbers as plain text in (`1 2 5`), one `<model>: <y>` line per number out."""

import json

LABEL = "half plus ten"


def input_handler(data, context):
    return json.dumps({"instances": [float(word) for word in data.read().decode().split()]})


def output_handler(response, context):
    if response.status_code != 200:
        return response.content, "application/json", response.status_code
    return "\n".join(f"{LABEL}: {y}" for y in response.json()["predictions"]), "text/plain"
