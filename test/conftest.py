"""What every folder of the suite shares: the rule about speed, and a local S3 server (s3_endpoint).

Tests that start whole stacks (serve with nginx, gunicorn and the model servers), run Batch Transform jobs or
examples end to end, build images, or wait out the model server's timers and limits are marked `slow`, by folder or
module below, so that `scripts/test.sh -m "not slow"` runs the rest in under a minute. CI runs everything."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import clients
import paths
import ports
import processes
import pytest

HERE = Path(__file__).parent

# Every folder a test's settings leave to their default is the test session's own: the default runtime folder is
# under $XDG_RUNTIME_DIR (runtime_dir.default_path), which the machine's own serve (scripts/serve-example.sh) uses
# too, and leaves its lock file in. One private folder per test process, removed at its exit.
os.environ["XDG_RUNTIME_DIR"] = str(processes.remove_at_exit(Path(tempfile.mkdtemp(prefix=paths.TEST_RUNTIME_PREFIX))))
SLOW = [
    HERE / name
    for name in (
        "stack",
        "distribution",
        "multi_model",
        "examples",
        "image",
        "gunicorn_app",
        "transform/test_transform_stack.py",
        "tune/test_tune_endpoint.py",
        "tune/test_tune_transform.py",
        "model_server/test_model_server_cli.py",
        "model_server/test_model_server_reload.py",
        "model_server/test_model_server_limits.py",
        "model_server/test_model_server_metrics.py",
        "model_server/test_model_server_batching.py",
        "model_server/test_model_server_warmup.py",
    )
]


MODEL_SERVER = HERE / "model_server"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.fspath)
        if any(path == slow or slow in path.parents for slow in SLOW):
            item.add_marker(pytest.mark.slow)
        if MODEL_SERVER in path.parents:
            item.add_marker(pytest.mark.model_server)


# Under pytest-xdist (scripts/test.sh runs two processes), the tests that share a session fixture stay in one
# process, so that it is set up once: these folders' tests go together (packaged examples, images, a multi-model
# stack), and any other module's tests (its module-scoped stack). test/model_server goes by module: its slow modules
# start servers of their own and mostly wait on them, so the folder in one process took 193 s, by module 107 s.
SHARED_BY_FOLDER = ("app", "gunicorn_app", "examples", "image", "multi_model", "transform")


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]  # test/<folder>/<module>.py
            parts = module.split("/")
            return "/".join(parts[:2]) if len(parts) > 2 and parts[1] in SHARED_BY_FOLDER else module

    return SharedFixtureScopes(config, log)


@pytest.fixture(scope="session")
def s3_endpoint() -> str:
    """moto's S3-compatible server on a free loopback port, with dummy credentials for boto3."""
    port = ports.free_port()
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    server = processes.Background([paths.VENV_BIN / "moto_server", "-H", "127.0.0.1", "-p", str(port)])
    with server:
        url = f"http://127.0.0.1:{port}"
        server.wait_until(lambda: clients.http_status(url + "/") is not None, timeout=60, what="listening")
        yield url
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
