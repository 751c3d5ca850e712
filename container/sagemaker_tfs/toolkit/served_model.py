"""`ServedModel`: what the default `model_fn` returns when the model directory holds SavedModels, a thin client
of the model server (never TensorFlow in the worker), so that a script can write only `input_fn`/`output_fn`."""

from __future__ import annotations

import json
from typing import Any

from ..model_client.model_servers import ModelServer, ModelServerClient, answer_json, round_robin
from ..shared.tfs_api import REQUEST_KEYS, SIGNATURE_KEY, model_path
from .plain import json_default

_ENCODER = json.JSONEncoder(default=json_default)  # json.dumps(..., default=...) makes one per call


class ServedModel:
    """The model server's `name` model. Calls go over the app's keep-alive connections, round-robin over the
    model server instances, with the app's timeout; a model server error raises HandlerError(its status,
    its message), which the client gets unless the script catches it."""

    def __init__(self, name: str, servers: list[ModelServer], client: ModelServerClient):
        if not servers:
            raise ValueError("ServedModel needs the model server, which serves only SavedModels")
        self.name = name
        self._client = client
        self._next_server = round_robin(servers)

    def predict(self, data: Any, *, version: int | str | None = None, signature_name: str | None = None) -> Any:
        """The `predictions` (row request) or `outputs` (columnar request) for `data`: a TFS request (a dict
        with instances, inputs or examples) as it is, anything else as the instances."""
        if isinstance(data, dict) and any(key in data for key in REQUEST_KEYS):
            request = dict(data) if signature_name else data
        else:
            request = {"instances": data}
        if signature_name:
            request[SIGNATURE_KEY] = signature_name
        answer = self.request(request, version=version)
        return answer["outputs"] if "outputs" in answer and "predictions" not in answer else answer["predictions"]

    def predict_arrays(
        self, inputs: Any, *, version: int | str | None = None, signature_name: str | None = None
    ) -> dict[str, Any]:
        """A Predict with numpy arrays, in binary over gRPC, never as JSON: `inputs` is one array for the
        signature's only input, or a dict of arrays by input name (converted to the inputs' types as REST converts
        JSON numbers). Returns the outputs by name as numpy arrays; a model server error raises HandlerError with
        the status and message the REST call would answer."""
        from ..model_client import tensor_calls  # numpy: scripts that call this have it

        server = self._next_server()
        return tensor_calls.predict(
            server.channel,
            server.rest_port,
            server.address,
            self.name,
            inputs,
            version=None if version is None else int(version),
            signature_name=signature_name,
            timeout=self._client.timeout,
        )

    def request(self, body: Any, *, version: int | str | None = None, method: str = "predict") -> Any:
        """Any TFS REST request (`predict`, `classify`, `regress`): `body` as a dict or list (sent as JSON,
        numpy through .tolist()), or the JSON text as str or bytes. Returns the parsed answer."""
        if isinstance(body, (dict, list)):
            body = _ENCODER.encode(body)
        path = model_path(self.name, None if version is None else str(version), method)
        return answer_json(self._client.request(self._next_server(), "POST", path, body))

    def __repr__(self) -> str:
        return f"ServedModel({self.name!r})"
