"""A transform job's parameters: SageMaker's CreateTransformJob fields, read under their API names (nested as in a
request, or flat by leaf name: `SplitType`) or the SageMaker Python SDK's names (`split_type`), validated before
anything runs, and written back as a CreateTransformJob request that SageMaker accepts unchanged.

Validation messages follow SageMaker's ValidationException ("1 validation error detected: Value 'X' at
'transformInput.splitType' failed to satisfy constraint: ..."). Rules beyond the field constraints ([INF] in
docs/batch-transform.md: SageMaker's exact wording is not documented):
  * MaxConcurrentTransforms x MaxPayloadInMB <= 100 when both are set;
  * JoinSource=Input needs ContentType == Accept, one of text/csv, application/json, application/jsonlines, and
    for CSV SplitType=Line and AssembleWith=Line;
  * InputFilter needs a JSON or CSV ContentType, OutputFilter and JoinSource a JSON or CSV Accept; CSV needs
    SplitType=Line and JSON SplitType None or Line whenever DataProcessing is used;
  * AugmentedManifestFile is refused (SageMaker: "not compatible" with Batch Transform).
Unset fields stay None, as the SDK leaves them out of the request: BatchStrategy, MaxPayloadInMB and
MaxConcurrentTransforms then come from the container's GET /execution-parameters (see api.py). Local paths
(or file:// URIs) are accepted wherever SageMaker takes an s3:// URI.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import MAX_TRANSFORM_MB
from ..shared import media_types
from ..shared.media_types import Format
from .dataprocessing import data_format
from .jsonpath import MAX_LENGTH as FILTER_MAX_LENGTH
from .jsonpath import JsonPathSyntaxError, compile_path
from .records import SPLIT_TYPES

# BatchStrategy as the API spells it, and as the container's environment and /execution-parameters do (config.py)
STRATEGY_ENV_NAMES = {"MultiRecord": "MULTI_RECORD", "SingleRecord": "SINGLE_RECORD"}
BATCH_STRATEGIES = tuple(STRATEGY_ENV_NAMES)
DATA_TYPES = ("S3Prefix", "ManifestFile")
COMPRESSION_TYPES = ("None", "Gzip")
ASSEMBLE_WITH = ("None", "Line")
JOIN_SOURCES = ("None", "Input")
JOIN_TYPES = (media_types.CSV, media_types.JSON, media_types.JSON_LINES)  # SageMaker's list, without aliases
DEFAULT_INSTANCE_TYPE = "ml.m5.xlarge"  # required by SageMaker; the instance type of the seed write-up
DEFAULT_TIMEOUT_SECONDS = 600
DEFAULT_MAX_RETRIES = 3
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
ENV_KEY_PATTERN = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,1023}$")
# CreateTransformJob fields that change nothing on one machine: accepted, kept in the request, not used.
IGNORED_FIELDS = ("Tags", "DataCaptureConfig", "BatchDataCaptureConfig", "ExperimentConfig")


class ValidationError(ValueError):
    """The job cannot be created; the message lists every problem, as SageMaker's ValidationException does."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        count = len(problems)
        super().__init__(f"{count} validation error{'s' if count > 1 else ''} detected: " + "; ".join(problems))


@dataclass(frozen=True)
class Param:
    sdk: str  # the SageMaker Python SDK's name (Transformer(...) / transform(...))
    path: tuple[str, ...]  # where CreateTransformJob holds it
    kind: type = str

    @property
    def api(self) -> str:
        return self.path[-1]

    @property
    def member(self) -> str:
        """The name SageMaker's validation messages use: transformInput.splitType."""
        return ".".join(part[0].lower() + part[1:] for part in self.path)


_INPUT = ("TransformInput",)
_S3 = ("TransformInput", "DataSource", "S3DataSource")
PARAMS = (
    Param("job_name", ("TransformJobName",)),
    Param("model_name", ("ModelName",)),
    Param("max_concurrent_transforms", ("MaxConcurrentTransforms",), int),
    Param("invocations_timeout_in_seconds", ("ModelClientConfig", "InvocationsTimeoutInSeconds"), int),
    Param("invocations_max_retries", ("ModelClientConfig", "InvocationsMaxRetries"), int),
    Param("max_payload", ("MaxPayloadInMB",), int),
    Param("strategy", ("BatchStrategy",)),
    Param("env", ("Environment",), dict),
    Param("data_type", _S3 + ("S3DataType",)),
    Param("data", _S3 + ("S3Uri",)),
    Param("content_type", _INPUT + ("ContentType",)),
    Param("compression_type", _INPUT + ("CompressionType",)),
    Param("split_type", _INPUT + ("SplitType",)),
    Param("output_path", ("TransformOutput", "S3OutputPath")),
    Param("accept", ("TransformOutput", "Accept")),
    Param("assemble_with", ("TransformOutput", "AssembleWith")),
    Param("output_kms_key", ("TransformOutput", "KmsKeyId")),
    Param("instance_type", ("TransformResources", "InstanceType")),
    Param("instance_count", ("TransformResources", "InstanceCount"), int),
    Param("volume_kms_key", ("TransformResources", "VolumeKmsKeyId")),
    Param("input_filter", ("DataProcessing", "InputFilter")),
    Param("output_filter", ("DataProcessing", "OutputFilter")),
    Param("join_source", ("DataProcessing", "JoinSource")),
)
BY_NAME = {**{p.sdk: p for p in PARAMS}, **{p.api: p for p in PARAMS}}
SECTIONS = {p.path[0] for p in PARAMS if len(p.path) > 1}  # TransformInput, ModelClientConfig, ...


@dataclass(frozen=True)
class TransformJob:
    """Validated job parameters, under the SDK's names. None means "not set" (SageMaker's default applies)."""

    job_name: str
    model_name: str
    data: str
    output_path: str
    data_type: str = "S3Prefix"
    content_type: str | None = None
    compression_type: str | None = None
    split_type: str | None = None
    strategy: str | None = None
    max_payload: int | None = None
    max_concurrent_transforms: int | None = None
    assemble_with: str | None = None
    accept: str | None = None
    input_filter: str | None = None
    output_filter: str | None = None
    join_source: str | None = None
    instance_count: int = 1
    instance_type: str = DEFAULT_INSTANCE_TYPE
    env: dict[str, str] = field(default_factory=dict)
    invocations_timeout_in_seconds: int | None = None
    invocations_max_retries: int | None = None
    output_kms_key: str | None = None
    volume_kms_key: str | None = None
    ignored: dict[str, Any] = field(default_factory=dict)  # IGNORED_FIELDS present in the request

    @classmethod
    def create(
        cls, request: Mapping[str, Any] | None = None, default_model_name: str = "model", **params: Any
    ) -> TransformJob:
        """A job from a CreateTransformJob request and/or parameters (API or SDK names; parameters win)."""
        problems: list[str] = []
        values: dict[str, Any] = {}
        ignored: dict[str, Any] = {}
        if request:
            _flatten(request, (), values, ignored, problems)
        for name, value in params.items():
            if value is None:
                continue
            if name in ("model_client_config", "ModelClientConfig") or name in SECTIONS:
                section = "ModelClientConfig" if name == "model_client_config" else name
                _flatten({section: value}, (), values, ignored, problems)
            elif name in BY_NAME:
                values[BY_NAME[name].sdk] = value
            else:
                problems.append(f"Unknown parameter {name!r}")
        values = {name: _coerce(BY_NAME[name], value, problems) for name, value in values.items()}
        values.setdefault("model_name", _safe_name(default_model_name))
        values.setdefault("job_name", job_name_from(values["model_name"]))
        for required in ("data", "output_path"):
            if not values.get(required):
                problems.append(
                    f"Value null at '{BY_NAME[required].member}' failed to satisfy constraint: Member must not be null"
                )
                values[required] = ""
            elif values[required].startswith("file://"):
                values[required] = values[required][len("file://") :]
        if problems and any(value is None for value in values.values()):  # values that did not even parse
            raise ValidationError(problems)
        job = cls(**values, ignored=ignored)
        problems += job.problems()
        if problems:
            raise ValidationError(problems)
        return job

    def validate(self) -> None:
        problems = self.problems()
        if problems:
            raise ValidationError(problems)

    def problems(self) -> list[str]:
        """What SageMaker would refuse in this job, one message each."""
        problems: list[str] = []
        enums = (
            ("data_type", DATA_TYPES),
            ("compression_type", COMPRESSION_TYPES),
            ("split_type", SPLIT_TYPES),
            ("strategy", BATCH_STRATEGIES),
            ("assemble_with", ASSEMBLE_WITH),
            ("join_source", JOIN_SOURCES),
        )
        for name, allowed in enums:
            value = getattr(self, name)
            if value is not None and value not in allowed:
                problems.append(_constraint(name, value, f"Member must satisfy enum value set: [{', '.join(allowed)}]"))
        ranges = (
            ("max_payload", 0, MAX_TRANSFORM_MB),
            ("max_concurrent_transforms", 0, None),
            ("instance_count", 1, None),
            ("invocations_timeout_in_seconds", 1, 3600),
            ("invocations_max_retries", 0, 3),
        )
        for name, low, high in ranges:
            value = getattr(self, name)
            if value is None:
                continue
            if value < low:
                problems.append(_constraint(name, value, f"Member must have value greater than or equal to {low}"))
            elif high is not None and value > high:
                problems.append(_constraint(name, value, f"Member must have value less than or equal to {high}"))
        if (
            self.max_payload
            and self.max_concurrent_transforms
            and self.max_payload * self.max_concurrent_transforms > MAX_TRANSFORM_MB
        ):
            problems.append(
                f"MaxConcurrentTransforms * MaxPayloadInMB must not exceed {MAX_TRANSFORM_MB} MB "
                f"({self.max_concurrent_transforms} * {self.max_payload} = "
                f"{self.max_concurrent_transforms * self.max_payload})"
            )
        for name in ("job_name", "model_name"):
            if not NAME_PATTERN.match(getattr(self, name)):
                problems.append(
                    _constraint(
                        name,
                        getattr(self, name),
                        f"Member must satisfy regular expression pattern: {NAME_PATTERN.pattern}",
                    )
                )
        for name in ("content_type", "accept"):
            value = getattr(self, name)
            if value is not None and len(value) > 256:
                problems.append(_constraint(name, value, "Member must have length less than or equal to 256"))
        return problems + self._environment_problems() + self._data_processing_problems()

    def _environment_problems(self) -> list[str]:
        problems = []
        if len(self.env) > 16:
            problems.append(
                _constraint("env", f"{len(self.env)} entries", "Member must have length less than or equal to 16")
            )
        for key, value in self.env.items():
            if not ENV_KEY_PATTERN.match(key):
                problems.append(
                    _constraint(
                        "env",
                        key,
                        "Map keys must satisfy constraint: [Member must satisfy "
                        f"regular expression pattern: {ENV_KEY_PATTERN.pattern}]",
                    )
                )
            if not isinstance(value, str):
                problems.append(_constraint("env", key, "Map values must be strings"))
            elif len(value) > 10240:
                problems.append(_constraint("env", key, "Map values must have length less than or equal to 10240"))
        return problems

    def _data_processing_problems(self) -> list[str]:
        problems = []
        for name in ("input_filter", "output_filter"):
            value = getattr(self, name)
            if value is None:
                continue
            if len(value) > FILTER_MAX_LENGTH:
                problems.append(
                    _constraint(name, value, f"Member must have length less than or equal to {FILTER_MAX_LENGTH}")
                )
                continue
            try:
                compile_path(value)
            except JsonPathSyntaxError as exc:
                problems.append(str(exc))
        join = self.join_source == "Input"
        filters_in = self.input_filter not in (None, "$")
        filters_out = self.output_filter not in (None, "$")
        if join:
            media = media_types.base(self.content_type)
            same = self.content_type is not None and self.accept is not None and media == media_types.base(self.accept)
            if not same or media not in JOIN_TYPES:
                problems.append(
                    f"JoinSource=Input requires ContentType and Accept to be the same, one of "
                    f"{', '.join(JOIN_TYPES)} (ContentType: {self.content_type}, Accept: {self.accept})"
                )
        if (filters_in or join) and data_format(self.content_type) is None:
            problems.append(
                f"DataProcessing supports only JSON and CSV input: ContentType {self.content_type} "
                f"is neither ({', '.join(JOIN_TYPES)})"
            )
        if (filters_out or join) and data_format(self.accept) is None:
            problems.append(
                f"OutputFilter and JoinSource support only JSON and CSV output: Accept {self.accept} "
                f"is neither ({', '.join(JOIN_TYPES)})"
            )
        if filters_in or filters_out or join:
            split = self.split_type or "None"
            if Format.CSV in (data_format(self.content_type), data_format(self.accept)) and split != "Line":
                problems.append("DataProcessing with text/csv requires SplitType=Line")
            elif split not in ("None", "Line"):
                problems.append(f"DataProcessing requires SplitType None or Line (SplitType: {split})")
            if join and data_format(self.accept) is Format.CSV and self.assemble_with != "Line":
                problems.append("JoinSource=Input with text/csv requires AssembleWith=Line")
        return problems

    # ----- what SageMaker would be sent, and what the runner uses -----

    def to_request(self) -> dict[str, Any]:
        """The CreateTransformJob request for this job (only the fields that are set, as the SDK sends)."""
        request: dict[str, Any] = {}
        for param in PARAMS:
            value = getattr(self, param.sdk)
            if value is None or (param.sdk == "env" and not value):
                continue
            node = request
            for part in param.path[:-1]:
                node = node.setdefault(part, {})
            node[param.api] = dict(value) if isinstance(value, dict) else value
        request["TransformInput"]["DataSource"]["S3DataSource"].setdefault("S3DataType", self.data_type)
        request.update(self.ignored)
        return request

    @property
    def invocations_timeout(self) -> int:
        return self.invocations_timeout_in_seconds or DEFAULT_TIMEOUT_SECONDS

    @property
    def max_retries(self) -> int:
        return DEFAULT_MAX_RETRIES if self.invocations_max_retries is None else self.invocations_max_retries


def _flatten(
    node: Mapping[str, Any], path: tuple[str, ...], values: dict[str, Any], ignored: dict[str, Any], problems: list[str]
) -> None:
    for key, value in node.items():
        here = path + (key,)
        param = next((p for p in PARAMS if p.path == here), None)
        if param is not None:
            values[param.sdk] = value
        elif not path and key in IGNORED_FIELDS:
            ignored[key] = value
        elif isinstance(value, Mapping) and any(p.path[: len(here)] == here for p in PARAMS):
            _flatten(value, here, values, ignored, problems)
        else:
            known = sorted(
                {p.path[len(path)] for p in PARAMS if p.path[: len(path)] == path and len(p.path) > len(path)}
            )
            problems.append(
                f"Unknown parameter in {'.'.join(path) or 'input'}: {key!r}, must be one of: {', '.join(known)}"
            )


def _coerce(param: Param, value: Any, problems: list[str]) -> Any:
    if param.kind is int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            problems.append(_constraint(param.sdk, value, "Member must be an integer"))
            return None
        try:
            return int(value)
        except ValueError:
            problems.append(_constraint(param.sdk, value, "Member must be an integer"))
            return None
    if param.kind is dict:
        if not isinstance(value, Mapping):
            problems.append(_constraint(param.sdk, value, "Member must be a map of strings"))
            return {}
        return dict(value)
    if not isinstance(value, str):
        problems.append(_constraint(param.sdk, value, "Member must be a string"))
        return None
    return value


def _constraint(name: str, value: Any, rule: str) -> str:
    return f"Value '{value}' at '{BY_NAME[name].member}' failed to satisfy constraint: {rule}"


def _safe_name(name: str) -> str:
    """A model name SageMaker accepts, made from a folder or file name."""
    cleaned = re.sub(r"-+", "-", re.sub(r"[^a-zA-Z0-9]", "-", name)).strip("-")
    return cleaned[:63] or "model"


def job_name_from(base: str) -> str:
    """A unique job name, as the SDK makes one: <base>-<yyyy-mm-dd-HH-MM-SS-mmm>."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d-%H-%M-%S-%f")[:-3]
    return f"{base[: 63 - len(stamp) - 1].rstrip('-')}-{stamp}"
