"""The --model_config_file text (model_server/model_config.py parse_config_text) against protobuf's text_format.

data[0] picks how the rest is the text: as UTF-8, or (odd) each byte a token of the format (a field name, a
bracket, a literal), what a fuzzer blind to protobuf's parser does not find byte by byte. The text goes to
parse_config_text, which may only answer models or raise ModelConfigError. The
reference is text_format.Parse of a ModelServerConfig: when it refuses the text, ours must; else ours refuses it
exactly when a rule the module documents is broken (custom_model_config, an entry without a name or base path or
the `tensorflow` platform, a name twice, a `specific` policy of no versions), and accepts it as the config's
entries, with each entry's version policy (`latest` of at least 1 version) and labels.
"""

from __future__ import annotations

import ast
from pathlib import Path

from google.protobuf import text_format
from sagemaker_tfs.model_server.model_config import ModelConfig, ModelConfigError, VersionPolicy, parse_config_text
from tensorflow_serving.config import model_server_config_pb2

MODULES = ("sagemaker_tfs.model_server.model_config",)
MAX_LEN = 2048  # (room for ~500 levels of nested Any messages, as tokens)


def _policy(entry: model_server_config_pb2.ModelConfig) -> VersionPolicy:
    policy = entry.model_version_policy
    if policy.HasField("specific"):
        return VersionPolicy("specific", versions=tuple(policy.specific.versions))
    if policy.HasField("all"):
        return VersionPolicy("all")
    if policy.HasField("latest"):
        return VersionPolicy("latest", num_versions=max(1, policy.latest.num_versions))
    return VersionPolicy()


_TOKENS = [
    *"{}:<>[],;",
    *("model_config_list", "config", "name", "base_path", "model_platform", "model_type", "model_version_policy"),
    *("specific", "versions", "all", "latest", "num_versions", "version_labels", "key", "value", "custom_model_config"),
    *("logging_config", "log_collector_config", "type", "unknown_field", "tensorflow", "TENSORFLOW", "true"),
    *('"tensorflow"', '"tensorflow2"', '"m"', '"a"', '"/m"', '""', "'x'", '"\\x00"', '"\\u00e9"', '"é"', '"a" "b"'),
    *("0", "1", "2", "-1", "-", "0x10", "017", "2147483648", "9223372036854775808", "1.5", "1e3", "inf", "nan"),
    *("[type.googleapis.com/tensorflow.serving.ModelServerConfig]", "[tensorflow.serving.ModelConfigList]"),
    *(" ", "\n", "#c\n", "\t"),
]


def _text(data: bytes) -> str:
    if data and data[0] & 1:
        return " ".join(_TOKENS[byte % len(_TOKENS)] for byte in data[1:])
    return data[1:].decode("utf-8", "replace")


def one_input(data: bytes) -> None:
    text = _text(data)
    try:
        models: list[ModelConfig] | ModelConfigError = parse_config_text(text, "fuzz.config")
    except ModelConfigError as exc:
        models = exc
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except (text_format.ParseError, RecursionError):  # (the reference's refusals: its error, or nesting too deep)
        assert isinstance(models, ModelConfigError), (text, models)
        return
    entries = config.model_config_list.config
    broken = config.WhichOneof("config") == "custom_model_config" or len({e.name for e in entries}) < len(entries)
    for entry in entries:
        specific = entry.model_version_policy.HasField("specific")
        broken |= not entry.name or not entry.base_path or entry.model_platform != "tensorflow"
        broken |= specific and not entry.model_version_policy.specific.versions
    assert isinstance(models, ModelConfigError) == broken, (text, models)
    if isinstance(models, ModelConfigError):
        return
    expected = [
        ModelConfig(entry.name, entry.base_path, "tensorflow", _policy(entry), dict(entry.version_labels))
        for entry in entries
    ]
    assert models == expected, (models, expected)


def _test_texts() -> list[bytes]:
    """The config texts of the model server's tests: str literals that hold a model_config_list."""
    test = Path(__file__).resolve().parents[2] / "test"
    found = []
    for path in (test / "model_server").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "model_config_list" in node.value:
                found.append(node.value.encode())
    return sorted(set(found))


def seeds() -> list[bytes]:
    policies = [
        "model_version_policy { specific { versions: 1 versions: 3 } }",
        "model_version_policy { all {} }",
        "model_version_policy { latest { num_versions: 2 } }",
        'version_labels { key: "stable" value: 1 } version_labels { key: "canary" value: 2 }',
    ]
    entry = 'config { name: "m%d" base_path: "/opt/ml/model/m" model_platform: "tensorflow" %s }'
    built = [f"model_config_list {{ {entry % (i, policy)} }}".encode() for i, policy in enumerate(policies)]
    texts = [*_test_texts(), *built, b'model_config_list: { config: [{ name: "a" }, { name: "a" }] }']
    tokens = [_TOKENS.index(token) for token in ("model_config_list", "{", "config", "{", "name", ":", '"m"')]
    tokens += [_TOKENS.index(token) for token in ("base_path", ":", '"/m"', "model_platform", ":", '"tensorflow"')]
    tokens += [_TOKENS.index(token) for token in ("}", "}")]
    return [b"\0" + text for text in texts] + [b"\1" + bytes(tokens)]
