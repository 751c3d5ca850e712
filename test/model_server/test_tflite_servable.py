"""TensorFlow Lite versions loaded in-process (tflite_servable.load): the signatures TFS makes of a model, runs by
tensor name, TFS's load errors, and the interpreter pool (concurrent runs on different interpreters)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import paths
import pytest
from ai_edge_litert.interpreter import Interpreter
from sagemaker_tfs.model_server import tflite_servable
from sagemaker_tfs.shared.error_codes import Code, ServingError


def load(path, interpreters: int = 1):
    return tflite_servable.load("m", 123, path, interpreters)


def shapes(signature):
    return {
        alias: (info.name, info.dtype, info.shape) for alias, info in {**signature.inputs, **signature.outputs}.items()
    }


def test_a_model_without_signature_metadata_gets_one_generated_serving_default():
    servable = load(paths.HALF_PLUS_TWO_TFLITE / "00000123")
    assert list(servable.signatures) == ["serving_default"]
    signature = servable.signatures["serving_default"]
    assert signature.method_name == "tensorflow/serving/predict"
    assert shapes(signature) == {"x": ("x", 1, (1, 1)), "y": ("y", 1, (1, 1))}  # 1: DT_FLOAT, the model's dims
    (y,) = servable.run({"x": np.array([[1.0], [2.0], [5.0]], np.float32)}, ["y"])
    assert y.tolist() == [[2.5], [3.0], [4.5]]


def test_signature_metadata_names_are_matched_to_the_tensors_without_their_suffix():
    servable = load(paths.HALF_PLUS_TWO_TFLITE_WITH_SIGDEF / "00000123")
    signature = servable.signatures["serving_default"]
    # the stored SignatureDef says tflite_input:0 and y:0; the tensors are tflite_input and y
    assert shapes(signature) == {"x": ("tflite_input", 1, (1, 1)), "y": ("y", 1, (1, 1))}
    assert servable.signature_def_map().signature_def["serving_default"].inputs["x"].name == "tflite_input"
    (y,) = servable.run({"tflite_input": np.array([4.0], np.float32)}, ["y"])
    assert y.tolist() == [4.0]


def test_the_converters_signature_runner_is_not_read_and_outputs_equal_without_suffix_collide(built_models, caplog):
    servable = load(built_models / "tflite_scale" / "1")
    signature = servable.signatures["serving_default"]
    # inputs scale_x:0 and scale_n:0; outputs PartitionedCall:0 (doubled) and :1 (scaled): both are
    # "PartitionedCall", and as in TFS the later name wins
    assert shapes(signature) == {
        "scale_x": ("scale_x:0", 1, (1, 2)),
        "scale_n": ("scale_n:0", 3, (1,)),
        "PartitionedCall": ("PartitionedCall:1", 1, (1, 2)),
    }
    assert "The model's signature runners scale are not read" in caplog.text
    assert (
        "TFLite tensors PartitionedCall:0 and PartitionedCall:1 are both 'PartitionedCall' in the generated "
        "signature: only PartitionedCall:1 is served"
    ) in caplog.text
    (scaled,) = servable.run(
        {"scale_x:0": np.array([[1.0, 2.0]], np.float32), "scale_n:0": np.array([4], np.int32)}, ["PartitionedCall:1"]
    )
    assert scaled.tolist() == [[4.0, 7.0]]


def test_named_signatures_from_the_metadata(built_models):
    servable = load(built_models / "tflite_scale_sigdefs" / "1")
    assert sorted(servable.signatures) == ["doubled_only", "serving_default"]
    doubled_only = servable.signatures["doubled_only"]
    assert shapes(doubled_only) == {"n": ("scale_n:0", 3, None), "doubled": ("PartitionedCall:0", 3, None)}
    # a run feeds only some inputs: the others keep what the interpreter holds, as in TFS
    (doubled,) = servable.run({"scale_n:0": np.array([1, 2, 3], np.int32)}, ["PartitionedCall:0"])
    assert doubled.tolist() == [2, 4, 6]
    scaled, doubled = servable.run(
        {"scale_x:0": np.array([[0.0, 1.0], [2.0, 3.0]], np.float32), "scale_n:0": np.array([5, 6], np.int32)},
        ["PartitionedCall:1", "PartitionedCall:0"],
    )
    assert scaled.tolist() == [[1.0, 4.0], [7.0, 10.0]]
    assert doubled.tolist() == [10, 12]


def test_a_feed_of_another_dtype_is_refused_with_tensorflows_message(built_models):
    servable = load(built_models / "tflite_scale_sigdefs" / "1")
    with pytest.raises(ServingError) as info:
        servable.run(
            {"scale_x:0": np.array([[1.0, 2.0]], np.float32), "scale_n:0": np.array([4], np.int64)},
            ["PartitionedCall:0"],
        )
    assert (info.value.code, info.value.message) == (
        Code.INVALID_ARGUMENT,
        "Expects arg[1] to be int32 but int64 is provided",
    )


def test_load_errors(tmp_path, built_models):
    (tmp_path / "model.tflite").write_bytes(b"this is not a flatbuffer")
    with pytest.raises(ServingError) as info:
        load(tmp_path)
    assert info.value.code == Code.INVALID_ARGUMENT
    assert info.value.message.startswith("Cannot build FlatBufferModel from buffer. (")
    (tmp_path / "model.tflite").unlink()
    with pytest.raises(ServingError) as info:
        load(tmp_path)
    assert info.value.code == Code.NOT_FOUND


def test_a_stored_signature_naming_an_unknown_tensor_fails_the_load(tmp_path):
    model = (paths.HALF_PLUS_TWO_TFLITE_WITH_SIGDEF / "00000123" / "model.tflite").read_bytes()
    # the stored SignatureDef names tflite_input:0; make it name a tensor the model does not have
    assert model.count(b"tflite_input:0") == 1
    (tmp_path / "model.tflite").write_bytes(model.replace(b"tflite_input:0", b"tflite_nput0:0"))
    with pytest.raises(ServingError) as info:
        load(tmp_path)
    assert (info.value.code, info.value.message) == (
        Code.INTERNAL,
        "Unknown tensor 'tflite_nput0:0'.\n\tSignature input x references an unknown tensor",
    )


def test_the_pool_size_is_pools_times_interpreters_per_pool():
    assert tflite_servable.interpreter_count(2, 3) == 6
    assert tflite_servable.interpreter_count(4, 0) == 4
    assert tflite_servable.interpreter_count(0, 1) == len(os.sched_getaffinity(0))


def test_concurrent_runs_use_different_interpreters(monkeypatch):
    """Two runs meet inside invoke() at once: only possible on two interpreters (with one, the second run waits
    for the first to return its interpreter, and the barrier breaks)."""
    invoke = Interpreter.invoke

    def run_on(servable, barrier):
        def meeting_invoke(self):
            barrier.wait()
            return invoke(self)

        monkeypatch.setattr(Interpreter, "invoke", meeting_invoke)
        feeds = {"x": np.array([[1.0]], np.float32)}
        with ThreadPoolExecutor(2) as pool:
            return [f.result()[0].tolist() for f in [pool.submit(servable.run, feeds, ["y"]) for _ in range(2)]]

    two = load(paths.HALF_PLUS_TWO_TFLITE / "00000123", interpreters=2)
    assert run_on(two, threading.Barrier(2, timeout=60)) == [[[2.5]], [[2.5]]]
    one = load(paths.HALF_PLUS_TWO_TFLITE / "00000123", interpreters=1)
    with pytest.raises(ServingError, match="^Failed to invoke TfLite interpreter$"):  # the barrier broke
        run_on(one, threading.Barrier(2, timeout=2))
