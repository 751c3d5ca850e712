"""Limits and failures that need settings of their own, each on its own stack: SAGEMAKER_MULTI_MODEL_MAX_MODELS,
the load deadline (408), a model server killed while loading (507), a restarted model server getting the current
models back, SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT; and the routes' absence in single-model mode."""

from __future__ import annotations

import os
import re
import shutil
import signal
from concurrent.futures import ThreadPoolExecutor

import clients
import model_dirs
import paths
import processes
import pytest
import serve_stack
from mme_support import MultiModelStack, error, gated_copy, model, model_server_state, predictions

WAIT_SECONDS = 15


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """Two model server instances, one model at most, loads cut after WAIT_SECONDS."""
    root = tmp_path_factory.mktemp("limited") / "models"
    root.mkdir()
    env = {"SAGEMAKER_MULTI_MODEL_MAX_MODELS": "1", "SAGEMAKER_TFS_WAIT_TIME_SECONDS": str(WAIT_SECONDS)}
    with MultiModelStack(root, env, instances=2) as stack:
        yield stack


def test_max_models_is_a_507_that_only_a_loadable_request_gets(limited):
    assert limited.listed().json() == {"models": []}
    first = str(model(limited.root, "first"))
    second = str(model(limited.root, "second"))
    assert limited.load("first", first).status == 200
    try:
        full = limited.load("second", second)
        assert (full.status, full.json()) == (
            507,
            error("Memory exhausted: 1 models are loaded and SAGEMAKER_MULTI_MODEL_MAX_MODELS is 1."),
        )
        # requests that would fail anyway keep their own answer: SageMaker evicts other models on a 507
        assert limited.load("first", second).status == 409
        assert limited.load("second", "relative").status == 400
        assert limited.load("second", "/elsewhere").status == 400
        assert limited.load("second", str(limited.root / "absent")).status == 404
    finally:
        limited.unload("first")
    assert limited.load("second", second).status == 200
    assert limited.unload("second").status == 200


def test_a_load_past_the_wait_time_is_408_and_leaves_nothing_behind(limited, gated):
    url, gate = gated_copy(limited.root, gated, "late")
    try:
        answer = limited.load("late", str(url))
        assert (answer.status, answer.json()) == (
            408,
            error(f"Failed to load model late: timed out after {WAIT_SECONDS} seconds"),
        )
        assert limited.listed().json() == {"models": []}
        assert [model_server_state(limited, "late", i) for i in (0, 1)] == [None, None]  # out of both instances
        assert limited.invoke("late").json() == error("Model late is not loaded yet.")
    finally:
        gate.open()
    assert limited.load("late", str(url)).status == 200  # the same name loads again (the gate is open now)
    assert limited.unload("late").status == 200


def test_a_model_server_killed_while_loading_is_a_507(limited, gated):
    url, gate = gated_copy(limited.root, gated, "heavy")
    try:
        with ThreadPoolExecutor(1) as pool:
            loading = pool.submit(limited.load, "heavy", str(url))
            processes.wait_for(
                lambda: model_server_state(limited, "heavy", 1) == "LOADING", what="the load on model server 1"
            )
            os.kill(limited.pid_of("tfs-1"), signal.SIGKILL)  # what the kernel's OOM killer does
            answer = loading.result()
        assert (answer.status, answer.json()) == (
            507,
            error(
                "Memory exhausted: model server 1 was killed (SIGKILL, as the kernel's OOM killer does) while loading "
                "model heavy"
            ),
        )
        assert limited.listed().json() == {"models": []}
        assert model_server_state(limited, "heavy") is None
    finally:
        gate.open()
    limited.wait_until(limited.ready, timeout=120, what="model server 1 back")
    assert model_server_state(limited, "heavy", 1) is None  # restarted with the models that are loaded: none


def test_a_restarted_model_server_gets_the_loaded_models_back_and_drops_those_it_cannot_load(limited):
    kept = model(limited.root, "kept-model")
    assert limited.load("kept", str(kept)).status == 200
    os.kill(limited.pid_of("tfs-0"), signal.SIGKILL)
    answers = []

    def restarting_seen() -> bool:
        answer = limited.invoke("kept")
        answers.append((answer.status, answer.body))
        return answer.status == 503

    processes.wait_for(restarting_seen, timeout=30, what="an invocation answered while model server 0 restarts")
    assert set(answers) <= {(200, predictions(2.5, 3.0).encode()), (503, b'{"error": "model server restarting"}')}
    limited.wait_until(limited.ready, timeout=120, what="model server 0 back")
    assert model_server_state(limited, "kept") == "AVAILABLE"
    assert {limited.invoke("kept").text for _ in range(6)} == {predictions(2.5, 3.0)}  # both instances serve it

    shutil.rmtree(kept)  # the model can no longer be loaded from its url
    os.kill(limited.pid_of("tfs-1"), signal.SIGKILL)
    processes.wait_for(lambda: limited.listed().json() == {"models": []}, timeout=120, what="the model dropped")
    assert limited.invoke("kept").json() == error("Model kept is not loaded yet.")  # SageMaker then loads it again
    processes.wait_for_log(limited, "dropping model kept: model server 1 could not load it again")


def test_the_memory_limit_is_a_507_after_every_check_a_retry_could_not_fix_and_no_default_model(tmp_path):
    root = tmp_path / "models"
    url = str(model(root, "small"))
    env = {"SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT": "1", "SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "small"}
    with MultiModelStack(root, env) as stack:
        processes.wait_for_log(
            stack,
            "SAGEMAKER_TFS_DEFAULT_MODEL_NAME=small is ignored: a multi-model endpoint's requests name their model",
        )
        assert stack.load("small", "relative").status == 400
        assert stack.load("small", str(root / "absent")).status == 404
        answer = stack.load("small", url)
        assert answer.status == 507
        assert re.fullmatch(
            r"Memory exhausted: \d+% of memory is in use and SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT"
            r" is 1\.",
            answer.json()["error"],
        ), answer.text
        assert stack.listed().json() == {"models": []}


def test_without_multi_model_there_are_no_model_routes(tmp_path):
    with serve_stack.Stack(model_dirs.copy_model(paths.HALF_PLUS_TWO, tmp_path, "model")) as stack:
        for method, path in (
            ("GET", "/models"),
            ("POST", "/models"),
            ("GET", "/models/model"),
            ("DELETE", "/models/model"),
            ("POST", "/models/model/invoke"),
        ):
            answer = clients.http_call(stack.port, method, path, "{}" if method == "POST" else None)
            assert (answer.status, answer.json()) == (404, {"error": "Not Found"}), path
