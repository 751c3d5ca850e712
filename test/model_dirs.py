"""Model folders made for a test: copies of reference models, code/ scripts, warm-up records."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path


def copy_model(source: Path, dest_parent: Path, name: str | None = None, versions: list[str] | None = None) -> Path:
    """Copy a reference model (optionally only some version folders) to dest_parent/name; returns the copy."""
    dest = dest_parent / (name or source.name)
    if versions is None:
        shutil.copytree(source, dest)
    else:
        dest.mkdir(parents=True)
        for version in versions:
            shutil.copytree(source / version, dest / version)
    return dest


def write_code(model_dir: Path, script: str | None = None, files: dict[str, str] | None = None) -> Path:
    """model_dir/code/inference.py holding `script` and code/<path> holding each of `files` (all dedented)."""
    for path, text in {**({"inference.py": script} if script is not None else {}), **(files or {})}.items():
        target = model_dir / "code" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    return model_dir


# A handler that reads the whole body and answers its size: bodies pass through the worker, not the model server.
PASS_THROUGH = """
    def handler(data, context):
        return str(len(data.read())), "text/plain"
"""


def predict_log(name: str = "", **inputs) -> bytes:
    """A serialized PredictionLog of a Predict request (a warm-up record), its inputs as tf.make_tensor_proto
    makes them."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    entry = prediction_log_pb2.PredictionLog()
    request = entry.predict_log.request
    request.model_spec.name = name
    for alias, value in inputs.items():
        request.inputs[alias].CopyFrom(tf.make_tensor_proto(value))
    return entry.SerializeToString()


def write_warmup_requests(version_dir: Path, records: list[bytes]) -> Path:
    """version_dir/assets.extra/tf_serving_warmup_requests holding `records` (TensorFlow's TFRecordWriter)."""
    import tensorflow as tf

    path = version_dir / "assets.extra" / "tf_serving_warmup_requests"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return path


def write_wheel(folder: Path, name: str, value: str) -> Path:
    """folder/<name>-0.1-py3-none-any.whl: a package `name` whose VALUE is `value`, for a requirements.txt that
    installs it with no index (`--no-index --find-links <folder>`)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    wheel_path = folder / f"{name}-0.1-py3-none-any.whl"
    info = f"{name}-0.1.dist-info"
    with zipfile.ZipFile(wheel_path, "w") as wheel:
        wheel.writestr(f"{name}/__init__.py", f"VALUE = {value!r}\n")
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", f"{name}/__init__.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return wheel_path
