"""The gunicorn workers give back the memory of large request bodies once they are answered (issue: a burst of
large POSTs used to leave a worker hundreds of MB larger, for good)."""

from __future__ import annotations

from pathlib import Path

import clients
import model_dirs
import processes
import random_traffic
import serve_stack
from stack_support import model_dir

PASS_THROUGH, BODY_MB, CLIENTS = model_dirs.PASS_THROUGH, 10, 40


def test_a_burst_of_large_posts_leaves_each_worker_within_20_percent_of_its_resident_memory_before(tmp_path):
    env = {"SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE": f"{BODY_MB + 1}m", "SAGEMAKER_GUNICORN_WORKERS": "2"}
    with serve_stack.Stack(model_dir(tmp_path, PASS_THROUGH), env=env) as stack:
        assert clients.post_burst(stack.port, b"x" * 1000, CLIENTS) == [200] * CLIENTS  # every thread exists
        pids = stack.gunicorn_workers()
        before = {pid: processes.resident_kb(pid) for pid in pids}
        assert clients.post_burst(stack.port, b"x" * (BODY_MB << 20), CLIENTS) == [200] * CLIENTS
        after = processes.settled_rss(pids, {pid: before[pid] * 1.2 for pid in pids})
        assert all(after[pid] <= 1.2 * before[pid] for pid in pids), f"VmRSS kB before {before}, after {after}"


def test_ten_bursts_of_large_posts_leave_each_worker_within_5_percent_of_its_memory_after_the_first(
    tmp_path: Path,
) -> None:
    """Issue 49's criterion: 10 bursts of 20 concurrent 10 MB POSTs; each worker's VmRSS after the tenth within 5%
    of after the first (random_traffic.memory_bursts, which scripts/fuzz_stack.py runs too)."""
    with random_traffic.memory_stack(tmp_path / "memory") as stack:
        after = random_traffic.memory_bursts(stack.port, stack.gunicorn_workers(), bursts=10)
    assert not random_traffic.memory_findings(after), f"VmRSS kB after each burst: {after}"
