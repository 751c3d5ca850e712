"""TensorFlow Serving's REST API words, in one home: its paths and the three inference methods. The app's client,
the direct route's nginx rules, the binary path and the embedded model server's router all build on these."""

from __future__ import annotations

MODELS = "/v1/models"  # the API's root: GET <MODELS>/<name> is a model's status
PREDICT, CLASSIFY, REGRESS = METHODS = ("predict", "classify", "regress")  # POST <model path>:<method>
DEFAULT_METHOD = PREDICT  # a request that names no method (the tfs-method custom attribute)
METHOD_PATTERN = "|".join(METHODS)  # for the regular expressions that route on the method
REQUEST_KEYS = ("instances", "inputs", "examples")  # a JSON object with one of them is a TFS request
SIGNATURE_KEY = "signature_name"  # the signature a TFS request names


def model_path(name: str, version: str | None = None, method: str | None = None) -> str:
    """The REST path of an inference call on a model (optionally one version); the method defaults to predict."""
    versions = f"/versions/{version}" if version is not None else ""
    return f"{MODELS}/{name}{versions}:{method or DEFAULT_METHOD}"


def status_path(name: str) -> str:
    """GET: the model's versions and their states."""
    return f"{MODELS}/{name}"


def metadata_path(name: str, version: str | None = None) -> str:
    """GET: the model's signatures."""
    versions = f"/versions/{version}" if version is not None else ""
    return f"{MODELS}/{name}{versions}/metadata"
