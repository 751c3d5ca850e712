"""The loop worker's hub (shared/cooperative.py) on its own: where a handler script's functions run (inline on the
loop until one is seen blocking it, then in threads), waits that time out, and a future completed in another thread.
The worker built on it is tested on raw sockets (test/gunicorn_app/test_gunicorn_worker.py) and through `serve`."""

from __future__ import annotations

import contextvars
import logging
import socket
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future

from sagemaker_tfs.shared import cooperative


def run_tasks(hub: cooperative.Hub, *tasks) -> list:
    """Run each task in a request greenlet of `hub`, polling it until all ended: their values in order."""
    results: dict[int, object] = {}
    for index, task in enumerate(tasks):
        hub.spawn(lambda index=index, task=task: results.__setitem__(index, task()))
    for _ in range(400):  # 20 s at most: a hang fails the test rather than the suite
        if len(results) == len(tasks):
            break
        hub.poll(0.05)
    assert len(results) == len(tasks), f"{len(tasks) - len(results)} task(s) did not end"
    return [results[index] for index in range(len(tasks))]


def where_it_ran() -> str:
    return threading.current_thread().name


def sleeps_2_ms() -> str:
    time.sleep(0.002)
    return threading.current_thread().name


def computes_2_ms() -> str:
    """Holds the thread 2 ms without blocking (as a preempted call would seem to)."""
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass
    return threading.current_thread().name


def test_outside_a_request_greenlet_a_script_function_is_simply_called():
    assert cooperative.hub() is None
    assert cooperative.call_script(where_it_ran) == threading.current_thread().name


def in_script_thread(name: str) -> bool:
    return name.startswith("script")


def test_a_script_function_runs_in_threads_until_it_has_been_quick_then_inline_on_the_loop(caplog):
    hub = cooperative.Hub(4)
    main = threading.current_thread().name
    with caplog.at_level(logging.WARNING, "sagemaker_tfs.app"):
        ran = [
            run_tasks(hub, lambda: cooperative.call_script(where_it_ran))[0]
            for _ in range(cooperative.TRUSTED_CALLS + 4)
        ]
    assert all(map(in_script_thread, ran[: cooperative.TRUSTED_CALLS])), ran
    assert ran[cooperative.TRUSTED_CALLS :] == [main] * 4 and caplog.text == ""


def test_a_function_that_always_blocks_stays_in_threads():
    hub = cooperative.Hub(4)
    ran = [
        run_tasks(hub, lambda: cooperative.call_script(sleeps_2_ms))[0] for _ in range(cooperative.TRUSTED_CALLS + 2)
    ]
    assert all(map(in_script_thread, ran))


def test_a_function_is_trusted_only_after_its_quick_calls_in_a_row():
    hub = cooperative.Hub(4)
    calls = 0

    def sometimes_slow() -> str:
        nonlocal calls
        calls += 1
        if calls % cooperative.TRUSTED_CALLS == 0:  # each run of quick calls one short of trust
            time.sleep(0.002)
        return where_it_ran()

    ran = [
        run_tasks(hub, lambda: cooperative.call_script(sometimes_slow))[0] for _ in range(3 * cooperative.TRUSTED_CALLS)
    ]
    assert all(map(in_script_thread, ran)), ran


def waits_between_its_parts() -> Iterator[str]:
    yield where_it_ran()
    time.sleep(0.002)
    yield where_it_ran()


def test_a_generator_that_waits_between_its_parts_stays_in_threads_when_many_of_its_streams_start_together():
    hub = cooperative.Hub(4 * cooperative.TRUSTED_CALLS)
    step = cooperative.script_step(END)

    def stream() -> list[str]:
        parts, names = waits_between_its_parts(), []
        while (name := step(parts)) is not END:
            names.append(name)
        return names

    first = run_tasks(hub, stream)  # one of its steps seen slow in a thread
    together = run_tasks(hub, *[stream] * (2 * cooperative.TRUSTED_CALLS))  # more quick first steps than TRUSTED_CALLS
    assert [len(names) for names in [*first, *together]] == [2] * (1 + 2 * cooperative.TRUSTED_CALLS)
    assert all(in_script_thread(name) for names in [*first, *together] for name in names)


END = object()


class Trusted:
    """A script function made inline by TRUSTED_CALLS quick calls; then it does what `then` says."""

    def __init__(self, hub: cooperative.Hub):
        self.then = where_it_ran
        for _ in range(cooperative.TRUSTED_CALLS):
            run_tasks(hub, lambda: cooperative.call_script(self))

    def __call__(self) -> str:
        return self.then()


def test_an_inline_function_that_starts_blocking_goes_back_to_threads_after_its_second_such_call(caplog):
    hub = cooperative.Hub(4)
    main = threading.current_thread().name
    function = Trusted(hub)
    function.then = sleeps_2_ms
    with caplog.at_level(logging.WARNING, "sagemaker_tfs.app"):
        # the first call makes it a suspect, the second (watched) is seen blocking: the third runs in a thread
        ran = [run_tasks(hub, lambda: cooperative.call_script(function))[0] for _ in range(4)]
    assert ran[:2] == [main, main] and all(map(in_script_thread, ran[2:]))
    [record] = [r for r in caplog.records if "blocked the worker's loop" in r.getMessage()]
    assert "blocked the worker's loop for " in record.getMessage()
    assert record.getMessage().endswith(
        " ms: its calls run in threads from now on, so that each holds up only its own request"
    )


def test_an_inline_function_that_holds_the_loop_without_blocking_stays_inline(caplog):
    """Computing is not blocking (a preempted call looks the same to a clock): it is watched, then cleared."""
    hub = cooperative.Hub(4)
    main = threading.current_thread().name
    function = Trusted(hub)
    function.then = computes_2_ms
    # Another thread of this process (xdist's channel) that waits for the GIL makes this one hand it over and wait
    # to take it back: a voluntary switch, as a blocking call makes. A long switch interval keeps it from asking.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1.0)
    try:
        with caplog.at_level(logging.WARNING, "sagemaker_tfs.app"):
            ran = [
                run_tasks(hub, lambda: cooperative.call_script(function))[0]
                for _ in range(cooperative.WATCHED_CALLS + 3)
            ]
    finally:
        sys.setswitchinterval(interval)
    assert ran == [main] * len(ran) and "blocked the worker's loop" not in caplog.text


def test_a_function_that_blocks_from_its_first_call_holds_up_only_its_own_request():
    hub = cooperative.Hub(4)
    released = threading.Event()
    order = []

    def waits() -> str:
        released.wait(10)
        order.append("held")
        return "held"

    def quick():
        order.append("quick")
        released.set()
        return "quick"

    assert run_tasks(hub, lambda: cooperative.call_script(waits), quick) == ["held", "quick"]
    assert order == ["quick", "held"]


REQUEST = contextvars.ContextVar("request", default=None)


def test_a_script_in_a_thread_sees_its_request_s_context_variables():
    """logs.request_id is one: a script's log lines name their request in a thread as inline."""
    hub = cooperative.Hub(4)

    def reads():
        return REQUEST.get(), in_script_thread(threading.current_thread().name)

    def request(name: str):
        REQUEST.set(name)
        return cooperative.call_script(reads)

    assert run_tasks(hub, lambda: request("a"), lambda: request("b")) == [("a", True), ("b", True)]
    for _ in range(cooperative.TRUSTED_CALLS):
        run_tasks(hub, lambda: request("x"))
    assert run_tasks(hub, lambda: request("c"), lambda: request("d")) == [("c", False), ("d", False)]


def test_a_wait_that_times_out_resumes_its_greenlet_with_false():
    hub = cooperative.Hub(4)
    left, right = socket.socketpair()
    with left, right:
        left.setblocking(False)
        watch = hub.watch(left, lambda: None)
        assert run_tasks(hub, lambda: hub.wait(left, watch, cooperative.READ, 0.05)) == [False]
        right.send(b"x")
        assert run_tasks(hub, lambda: hub.wait(left, watch, cooperative.READ, 5)) == [True]


def test_an_idle_watched_socket_closed_by_its_peer_is_reported():
    hub = cooperative.Hub(4)
    left, right = socket.socketpair()
    closed = []
    with left:
        hub.watch(left, lambda: closed.append(True) or hub.unregister(left))
        right.close()
        for _ in range(100):
            if closed:
                break
            hub.poll(0.05)
    assert closed == [True]


def test_a_future_completed_in_another_thread_resumes_its_greenlet():
    hub = cooperative.Hub(4)
    future: Future = Future()
    threading.Timer(0.02, future.set_result, ("done",)).start()
    assert run_tasks(hub, lambda: hub.wait_future(future), lambda: "meanwhile") == ["done", "meanwhile"]
    failed: Future = Future()
    threading.Timer(0.02, failed.set_exception, (ValueError("no"),)).start()

    def outcome():
        try:
            return hub.wait_future(failed)
        except ValueError as exc:
            return f"raised {exc}"

    assert run_tasks(hub, outcome) == ["raised no"]


def test_a_timed_wait_for_a_future_ends_at_its_timeout_and_a_late_result_wakes_nobody():
    hub = cooperative.Hub(4)
    late: Future = Future()
    woken = []

    def waits_then_goes_on():
        try:
            hub.wait_future(late, timeout=0.05)
        except TimeoutError as exc:
            outcome = f"timed out: {exc}"
        late.set_result("late")  # the future's wake-up comes after the wait ended: it must resume nothing
        hub.wait(*pair_wait)  # suspended again on a socket: a stray wake-up would end this wait before it is ready
        woken.append(left.recv(1))
        return outcome

    left, right = socket.socketpair()
    with left, right:
        left.setblocking(False)
        pair_wait = (left, hub.watch(left, lambda: None), cooperative.READ, 5)
        threading.Timer(0.3, right.send, (b"x",)).start()
        assert run_tasks(hub, waits_then_goes_on) == ["timed out: no result in 0.05 s"]
    assert woken == [b"x"]


def test_a_timed_wait_for_a_future_completed_by_another_greenlet_gets_its_result():
    hub = cooperative.Hub(4)
    answer: Future = Future()

    def waits():
        hub.spawn(lambda: answer.set_result("computed beside"))
        return hub.wait_future(answer, timeout=5)

    assert run_tasks(hub, waits) == ["computed beside"]
