"""The universal script: every model without its own code/inference.py answers with it. The default handler
reads the request (JSON, JSON lines, CSV); the answer names the model and version that computed it."""

from sagemaker_tfs.codecs import default_input_handler


def input_handler(data, context):
    return default_input_handler(data, context)


def output_handler(response, context):
    if response.status_code != 200:
        return response.content, "application/json", response.status_code
    return {
        "model": context.model_name,
        "version": context.model_version or "latest",
        "predictions": response.json()["predictions"],
    }, "application/json"
