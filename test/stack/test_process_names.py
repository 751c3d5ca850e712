"""What `ps -eo args` shows for each process of a running stack (/proc/PID/cmdline, which setproctitle rewrites):
serve, the model server with its models and ports, gunicorn's master and each worker with its slot, nginx."""

from __future__ import annotations

from pathlib import Path

import paths
import pytest
import serve_stack
from processes import descendants
from stack_support import model_dir


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    folder = model_dir(tmp_path_factory.mktemp("names"), model=paths.HALF_PLUS_TWO)
    with serve_stack.Stack(folder, env={"SAGEMAKER_GUNICORN_WORKERS": "2"}) as stack:
        yield stack


def args(pid: int) -> str:
    """The command line as ps -eo args shows it: the arguments joined by spaces, setproctitle's padding dropped."""
    return " ".join(part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if part)


def test_serve_is_named_serve(stack):
    assert args(stack.proc.pid) == "serve"


def test_serves_reaper_is_named(stack):
    children = {args(pid) for pid in descendants(stack.proc.pid)}
    assert "serve: reaper" in children


def test_the_model_server_names_its_models_and_ports(stack):
    grpc, rest = stack.model_server_ports
    assert args(stack.pid_of("tfs-0")) == f"tfs-model-server: models model (rest {rest}, grpc {grpc})"


def test_the_gunicorn_master_and_each_worker_slot_are_named(stack):
    assert args(stack.pid_of("gunicorn-supervised")) == "gunicorn: master [sagemaker-tfs]"
    workers = sorted(args(pid) for pid in stack.gunicorn_workers())
    assert workers == ["gunicorn: worker 0 [sagemaker-tfs]", "gunicorn: worker 1 [sagemaker-tfs]"]


def test_nginx_keeps_its_own_names(stack):
    master = stack.pid_of("nginx-supervised")
    assert args(master).startswith("nginx: master process ")
    assert {args(pid) for pid in descendants(master)} == {"nginx: worker process"}


def test_the_titles_leave_the_environment_readable(stack):
    """SPT_NOENV: setproctitle does not write over /proc/PID/environ (tests and operators read the settings there)."""
    for pid in (stack.proc.pid, stack.pid_of("tfs-0"), *stack.gunicorn_workers()):
        assert b"SAGEMAKER_BIND_TO_PORT=" in Path(f"/proc/{pid}/environ").read_bytes()


def test_a_long_model_list_is_cut_to_three_names():
    from sagemaker_tfs.model_server.flags import Flags
    from sagemaker_tfs.model_server.model_config import ModelConfig
    from sagemaker_tfs.model_server.server import process_title

    configs = [ModelConfig(name, "/models/" + name) for name in ("a", "b", "c", "d", "e")]
    assert (
        process_title(Flags(port=0, rest_api_port=8501), configs)
        == "tfs-model-server: models a, b, c +2 more (rest 8501)"
    )
    assert process_title(Flags(), []) == "tfs-model-server: no models at start (grpc 8500)"
