"""Concurrency through the whole stack: two loads of one name, invocations of a model while another loads,
loads of different names in parallel, an unload while invocations of the model run. Loads are held in flight by
a gated model (its load waits until the test opens its gate), invocations by a handler waiting on a FIFO: no
sleeps, no timing."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import clients
import paths
import processes
from mme_support import error, gated_copy, model, model_server_state, predictions


def test_two_loads_of_one_name_one_200_one_409(stack, root, gated):
    url, gate = gated_copy(root, gated, "twice")
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(stack.load, "twice", str(url))
        processes.wait_for(lambda: model_server_state(stack, "twice") == "LOADING", what="the first load in flight")
        second = pool.submit(stack.load, "twice", str(url))
        gate.open()
        answers = sorted(
            [(first.result().status, first.result().json()), (second.result().status, second.result().json())]
        )
    try:
        assert answers[0][0] == 200
        assert answers[1] == (409, error("Model twice is already loaded."))
        assert stack.invoke("twice").text == predictions(2.5, 3.0)
    finally:
        stack.unload("twice")


def test_a_slow_load_blocks_neither_other_models_nor_other_loads(stack, root, gated):
    url, gate = gated_copy(root, gated, "slow")
    assert stack.load("quick", str(model(root, "quick-model"))).status == 200
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(stack.load, "slow", str(url))
        try:
            processes.wait_for(lambda: model_server_state(stack, "slow") == "LOADING", what="the slow load in flight")
            answers = {stack.invoke("quick").text for _ in range(50)}
            assert answers == {predictions(2.5, 3.0)}
            assert clients.http_status(stack.url + "/ping") == 200
            assert stack.listed().json() == {"models": [{"modelName": "quick", "modelUrl": str(root / "quick-model")}]}
            assert stack.invoke("slow").json() == error("Model slow is not loaded yet.")
            assert stack.call("GET", "/models/slow").json() == error("Model slow is not loaded yet.")
            # another name loads (and unloads) while the slow one is still loading
            assert stack.load("parallel", str(model(root, "parallel-model", paths.HALF_PLUS_THREE))).status == 200
            assert stack.invoke("parallel").text == predictions(3.5, 4.0)
            assert stack.unload("parallel").status == 200
            assert not slow.done()
        finally:
            gate.open()
        assert slow.result().status == 200
    try:
        assert stack.invoke("slow").text == predictions(2.5, 3.0)
        assert stack.invoke("quick").text == predictions(2.5, 3.0)
    finally:
        stack.unload("slow")
        stack.unload("quick")


def test_an_unload_waits_for_running_invocations_and_new_ones_are_404_at_once(stack, root, tmp_path):
    started, release = tmp_path / "started", tmp_path / "release"
    os.mkfifo(release)
    url = model(
        root,
        "busy",
        script=f"""
        from pathlib import Path

        def handler(data, context):
            if data.read() == b"block":
                Path({str(started)!r}).touch()
                Path({str(release)!r}).read_bytes()  # waits until the test opens the FIFO
                return "finished", "text/plain"
            return "quick", "text/plain"
    """,
    )
    assert stack.load("busy", str(url)).status == 200
    with ThreadPoolExecutor(2) as pool:
        running = pool.submit(stack.invoke, "busy", "block", "text/plain")
        processes.wait_for(started.exists, what="the invocation in its handler")
        unloading = pool.submit(stack.unload, "busy")
        processes.wait_for(
            lambda: stack.invoke("busy", "quick", "text/plain").status == 404, what="new invocations answered 404"
        )
        assert stack.listed().json() == {"models": []}
        assert not unloading.done()  # the running invocation has not finished: the unload has not either
        with open(release, "wb"):
            pass
        assert (running.result().status, running.result().text) == (200, "finished")
        assert unloading.result().json() == {"success": "Successfully unloaded model busy."}
    assert model_server_state(stack, "busy") is None
    assert stack.invoke("busy", "quick", "text/plain").json() == error("Model busy is not loaded yet.")
