"""The gRPC server's start and stop, many times in one process (grpc_service.start_grpc_server on grpc.aio): a
served method answers, with its success and with its error status, an unknown method gets UNIMPLEMENTED, and
stopping never crashes the process (the earlier server on grpcio's private layer crashed it with SIGSEGV when a stop
raced its serving thread)."""

from __future__ import annotations

import subprocess
import sys

import ports

# `cycles` times on one event loop: start, a status call of a served model and of an unknown one, a call of an
# unknown method, stop; the client is the synchronous grpcio channel, in a thread beside the serving loop
_CYCLES = """
import asyncio
import sys
import tempfile
from pathlib import Path

import grpc
import uvloop
from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

from sagemaker_tfs.model_server.grpc_service import start_grpc_server
from sagemaker_tfs.model_server.model_config import ModelConfig
from sagemaker_tfs.model_server.runner import Runner
from sagemaker_tfs.model_server.servable import Servable
from sagemaker_tfs.model_server.servable_manager import ServableManager


def calls(address):
    with grpc.insecure_channel(address) as channel:
        status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "served"
        response = status(request, timeout=30)
        assert [(v.version, v.state) for v in response.model_version_status] == [(1, 30)], response
        request.model_spec.name = "absent"
        try:
            status(request, timeout=30)
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND, error
        else:
            raise AssertionError("an unknown model's status was answered")
        try:
            channel.unary_unary("/tensorflow.serving.ModelService/Other")(b"", timeout=30)
        except grpc.RpcError as error:
            assert (error.code(), error.details()) == (grpc.StatusCode.UNIMPLEMENTED, "Method not found!"), error
        else:
            raise AssertionError("an unknown method was answered")


async def main(port, cycles):
    base = Path(tempfile.mkdtemp()) / "served"
    (base / "1").mkdir(parents=True)
    servables = ServableManager([ModelConfig("served", str(base))], lambda *version: Servable(*version, {}))
    servables.refresh()
    runner = Runner(asyncio.get_running_loop(), None, 1, 0)
    for _ in range(cycles):
        running = await start_grpc_server(servables, runner, port, "", 1, "127.0.0.1")
        try:
            await asyncio.to_thread(calls, f"127.0.0.1:{port}")
        finally:
            await running.stop(1)
    runner.close()


port, cycles = int(sys.argv[1]), int(sys.argv[2])
uvloop.run(main(port, cycles))
print(cycles, "cycles")
"""


def _run_cycles(cycles: int) -> None:
    """_CYCLES in a subprocess, so that a crash fails the test and not the test process."""
    port = ports.free_port()  # bound again each cycle (grpc binds with SO_REUSEADDR)
    result = subprocess.run(
        [sys.executable, "-c", _CYCLES, str(port), str(cycles)], capture_output=True, text=True, timeout=240
    )
    assert (result.returncode, result.stdout) == (0, f"{cycles} cycles\n"), result.stderr[-2000:]


def test_a_started_server_answers_and_stops():
    _run_cycles(1)


def test_many_starts_and_stops_in_one_process_never_crash():
    _run_cycles(300)
