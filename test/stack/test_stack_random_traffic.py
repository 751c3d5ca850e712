"""The stack under random traffic (issue 49), at the suite's size: seeded random requests (generated_requests.Traffic)
through nginx to the four stacks of random_traffic.py (no script with the direct route on and off, a handler pair, a
toolkit script; the local runtime API on each), over keep-alive connections. scripts/fuzz_stack.py runs the same
with 100,000 requests and the memory bursts.

Asserted: no 5xx but the documented ones (random_traffic.DOCUMENTED_5XX), every error body JSON, the same answer and
connection handling on both routes, every stack's gunicorn workers the same and its log free of tracebacks, worker
exits and timeouts, and /ping 200 after. (Answers without a request id are reported by the script, not asserted
here: nginx's own error pages carry none.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import random_traffic
import serve_stack
from generated_requests import Traffic

# SAGEMAKER_TEST_SEED and SAGEMAKER_TEST_REQUESTS explore further; the default is fixed, so that a run cannot fail
# by chance.
SEED = int(os.environ.get("SAGEMAKER_TEST_SEED", "49"))
COUNT = int(os.environ.get("SAGEMAKER_TEST_REQUESTS", "3000"))
# Requests of seed 49 that scripts/fuzz_stack.py's 100,000 found wrong, each sent too (when the seed is 49): a
# repeated Content-Type or custom attributes line read otherwise by the runtime API's InvokeEndpoint with the direct
# route off (4112, 13567, 17932), a refused request's large body (the worker and the runtime API's server closing
# with it unread: 503; 27550, 33643), an unknown Transfer-Encoding over the body limit (nginx's HTML 413; 70045,
# 76685), a HEAD refused before its request id (6273)
FOUND = (4112, 13567, 17932, 27550, 33643, 70045, 76685, 6273)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, serve_stack.Stack]]:
    started = random_traffic.start_stacks(tmp_path_factory.mktemp("random-traffic"))
    try:
        yield started
    finally:
        random_traffic.stop_stacks(started)


def test_random_traffic_gets_documented_answers_the_same_on_both_routes_and_crashes_nothing(
    stacks: dict[str, serve_stack.Stack],
) -> None:
    watches = {name: random_traffic.Watch(stack) for name, stack in stacks.items()}
    indexes = [*range(COUNT), *(index for index in FOUND if SEED == 49 and index >= COUNT)]
    report = random_traffic.send_traffic(stacks, Traffic(SEED, random_traffic.LIMIT_BYTES), indexes)
    for name, watch in watches.items():
        report.findings += watch.findings(name)
    found = report.failures()
    shown = "\n".join(str(finding) for finding in found[:10])
    assert not found, f"seed {SEED}: {len(found)} findings of {COUNT} requests ({report.kinds()}); the first:\n{shown}"
    # every stack well exercised, successes and errors alike
    assert all(report.requests[name] >= COUNT // 5 for name in stacks), report.requests
    assert all(counted[200] >= report.requests[name] // 20 for name, counted in report.statuses.items())
    print(f"seed {SEED}: {COUNT} requests in {report.seconds:.0f} s, {dict(report.requests)}")
