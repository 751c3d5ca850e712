"""The suite's one rule about speed: tests that start whole stacks (serve with nginx, gunicorn and the model servers),
run Batch Transform jobs or examples end to end, build images, or wait out the model server's timers and limits are
marked `slow`, by folder or module below, so that `scripts/test.sh -m "not slow"` runs the rest in under a minute.
CI runs everything."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent
SLOW = [HERE / name for name in ("stack", "multi_model", "examples", "image", "gunicorn_app",
                                 "transform/test_transform_stack.py", "model_server/test_model_server_cli.py",
                                 "model_server/test_model_server_reload.py", "model_server/test_model_server_limits.py",
                                 "model_server/test_model_server_metrics.py",
                                 "model_server/test_model_server_batching.py")]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.fspath)
        if any(path == slow or slow in path.parents for slow in SLOW):
            item.add_marker(pytest.mark.slow)
