"""Which models to serve: the text-format ModelServerConfig, version folders and version policies.

The config is parsed with tensorflow-serving-api's own `ModelServerConfig` message. A model's versions are
the sub-folders of its base path whose name is a version (version_folders.py, the rule `serve` checks the model
tree with: ASCII digits, `00000123` is version 123); hidden folders, `code/` and other names are ignored. Policies
as in TFS: `latest` (default, 1 version) serves the N highest, `all` every one, `specific` the listed ones that
exist.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from ..shared.version_folders import parse_version

log = logging.getLogger(__name__)


class ModelConfigError(ValueError):
    """The model config cannot be used; the message says why."""


@dataclass(frozen=True)
class VersionPolicy:
    kind: str = "latest"  # latest | all | specific
    num_versions: int = 1  # latest
    versions: tuple[int, ...] = ()  # specific

    def select(self, available: list[int]) -> list[int]:
        """The versions to serve among those on disk, highest first."""
        ordered = sorted(available, reverse=True)
        if self.kind == "all":
            return ordered
        if self.kind == "specific":
            return [v for v in ordered if v in self.versions]
        return ordered[: max(1, self.num_versions)]


@dataclass(frozen=True)
class ModelConfig:
    name: str
    base_path: str
    platform: str = "tensorflow"
    policy: VersionPolicy = VersionPolicy()
    labels: dict[str, int] = field(default_factory=dict)


def load_config_file(path: str | Path) -> list[ModelConfig]:
    """The models of a text-format ModelServerConfig file; raises ModelConfigError."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ModelConfigError(f"cannot read model config file {path}: {exc.strerror}") from None
    return parse_config_text(text, str(path))


def parse_config_text(text: str, source: str = "<config>") -> list[ModelConfig]:
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except (text_format.ParseError, RecursionError) as exc:  # text_format recurses into nested (Any) messages
        reason = exc if isinstance(exc, text_format.ParseError) else "messages nested too deeply"
        raise ModelConfigError(
            f"Invalid protobuf file: '{source}': Error parsing text-format tensorflow.serving.ModelServerConfig: "
            f"{reason}"
        ) from None
    if config.WhichOneof("config") == "custom_model_config":
        raise ModelConfigError(f"{source}: custom_model_config is not supported, use model_config_list")
    return configs_from_list(config.model_config_list, source)


def configs_from_list(model_config_list: model_server_config_pb2.ModelConfigList, source: str) -> list[ModelConfig]:
    """The models of a ModelConfigList message; raises ModelConfigError."""
    models = [_model_config(entry) for entry in model_config_list.config]
    names = [m.name for m in models]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ModelConfigError(f"{source}: model name(s) configured more than once: {', '.join(duplicates)}")
    return models


def _model_config(entry: model_server_config_pb2.ModelConfig) -> ModelConfig:
    if not entry.name:
        raise ModelConfigError("a model config has no name")
    if not entry.base_path:
        raise ModelConfigError(f"model {entry.name} has no base_path")
    platform = entry.model_platform
    if not platform:
        raise ModelConfigError(
            "Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
            f"ModelServerConfig::model_platform, model name is {entry.name}"
        )
    if platform != "tensorflow":
        raise ModelConfigError(f"PlatformConfigMap has no entry for platform {platform}")
    which = entry.model_version_policy.WhichOneof("policy_choice")
    if which == "specific":
        policy = VersionPolicy("specific", versions=tuple(entry.model_version_policy.specific.versions))
        if not policy.versions:
            raise ModelConfigError(f"model {entry.name}: the specific version policy lists no versions")
    elif which == "all":
        policy = VersionPolicy("all")
    elif which == "latest":
        policy = VersionPolicy("latest", num_versions=max(1, entry.model_version_policy.latest.num_versions))
    else:
        policy = VersionPolicy()
    return ModelConfig(entry.name, entry.base_path, platform, policy, dict(entry.version_labels))


def list_versions(base_path: str | Path) -> dict[int, Path]:
    """Version number -> folder under base_path. Raises OSError when base_path cannot be listed.

    Two folders naming the same number (`1` and `001`): the lexicographically later name wins, as in TFS.
    """
    found: dict[int, Path] = {}
    for entry in sorted(os.scandir(base_path), key=lambda e: e.name):
        version = parse_version(entry.name)
        if version is None or not entry.is_dir():
            continue
        if version in found:
            log.warning(
                "versions %s and %s of %s are both version %d; serving %s",
                found[version].name,
                entry.name,
                base_path,
                version,
                entry.name,
            )
        found[version] = Path(entry.path)
    return found
