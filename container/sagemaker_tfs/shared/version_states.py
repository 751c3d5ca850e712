"""TensorFlow Serving's version states, as its ModelVersionStatus.State names them: the embedded model server sets
them (model_server/servable_manager.py), the status API sends them by name (GET /v1/models/<name>, GetModelStatus),
and serve's start-up, /ping and the multi-model registry read them (model_client/model_servers.py)."""

from __future__ import annotations

from .str_enum import StrEnum


class VersionState(StrEnum):
    START = "START"  # known to the manager, not yet loading
    LOADING = "LOADING"
    AVAILABLE = "AVAILABLE"  # serving requests
    UNLOADING = "UNLOADING"
    END = "END"  # unloaded, removed, or failed to load (the status then has the error)
