"""grpc_server.py drives grpc core through cygrpc, grpcio's private layer: these tests fail, naming what changed,
when the grpcio installed no longer offers what it uses (its own list, CYGRPC_USED), or when grpc's server API
that the generated stubs call is one GrpcServer lacks."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import grpc
import ports
import pytest
from grpc._cython import cygrpc
from sagemaker_tfs.model_server import grpc_server
from sagemaker_tfs.model_server.grpc_server import CYGRPC_USED, GrpcServer
from tensorflow_serving import apis

# How a test builds each cygrpc type grpc_server.py constructs (the arguments it passes them).
_CONSTRUCTED = {
    "SendInitialMetadataOperation": (None, 0),
    "SendMessageOperation": (b"", 0),
    "SendStatusFromServerOperation": (None, 0, "", 0),
    "ReceiveCloseOnServerOperation": (0,),
    "ReceiveMessageOperation": (0,),
    "CompletionQueue": (),
    "Server": ((), False),
}


def _resolve(dotted: str):
    target = cygrpc
    for part in dotted.split("."):
        assert hasattr(target, part), f"grpcio {grpc.__version__}: cygrpc has no {dotted} (grpc_server.py uses it)"
        target = getattr(target, part)
    return target


def test_every_cygrpc_name_the_server_uses_is_declared():
    source = Path(grpc_server.__file__).read_text()
    used = set(re.findall(r"cygrpc\.(\w+)", source))
    declared = {name.split(".")[0] for name, _ in CYGRPC_USED}
    assert used <= declared, f"grpc_server.py uses cygrpc names missing from CYGRPC_USED: {sorted(used - declared)}"


@pytest.mark.parametrize("name, arity", CYGRPC_USED, ids=[name for name, _ in CYGRPC_USED])
def test_cygrpc_still_offers_what_the_server_uses(name, arity):
    target = _resolve(name)
    if arity is None:
        return
    assert callable(target), f"grpcio {grpc.__version__}: cygrpc.{name} is no longer callable"
    if inspect.isclass(target):  # Cython types have no introspectable signature: build one as the server does
        args = _CONSTRUCTED[name]
        assert len(args) == arity
        try:
            built = target(*args)
        except TypeError as exc:
            pytest.fail(f"grpcio {grpc.__version__}: cygrpc.{name}{args!r} fails: {exc}")
        if name == "Server":
            built.destroy()
        return
    try:
        inspect.signature(target).bind(None, *[None] * arity)
    except TypeError as exc:
        pytest.fail(
            f"grpcio {grpc.__version__}: cygrpc.{name}{inspect.signature(target)} no longer takes the "
            f"{arity} argument(s) grpc_server.py passes: {exc}"
        )


def test_grpc_server_offers_what_grpc_server_api_and_the_generated_stubs_call():
    expected = inspect.signature(grpc.Server.add_registered_method_handlers)
    assert list(expected.parameters) == ["self", "service_name", "method_handlers"], (
        f"grpcio {grpc.__version__}: grpc.Server.add_registered_method_handlers is now {expected}"
    )
    assert inspect.signature(GrpcServer.add_registered_method_handlers).parameters.keys() == expected.parameters.keys()
    for stub in Path(apis.__path__[0]).glob("*_pb2_grpc.py"):
        for method in set(re.findall(r"\bserver\.(\w+)\(", stub.read_text())):
            assert hasattr(GrpcServer, method), f"{stub.name} calls server.{method}(), which GrpcServer lacks"


# start, a call, an unknown method's call (UNIMPLEMENTED), stop: `cycles` times in one process
_CYCLES = """
import sys

import grpc

from sagemaker_tfs.model_server.grpc_server import GrpcServer


async def echo(request, _context):
    return request[::-1]


handler = grpc.unary_unary_rpc_method_handler(echo, request_deserializer=bytes, response_serializer=bytes)
address, cycles = sys.argv[1], int(sys.argv[2])
for _ in range(cycles):
    server = GrpcServer([])
    server.add_registered_method_handlers("test.Echo", {"Reverse": handler})
    assert server.add_insecure_port(address)
    server.start()
    try:
        with grpc.insecure_channel(address) as channel:
            assert channel.unary_unary("/test.Echo/Reverse")(b"abc", timeout=30) == b"cba"
            try:
                channel.unary_unary("/test.Echo/Other")(b"abc", timeout=30)
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNIMPLEMENTED, error.code()
            else:
                raise AssertionError("an unknown method was answered")
    finally:
        server.stop(1)
print(cycles, "cycles")
"""


def _run_cycles(cycles: int) -> None:
    """_CYCLES in a subprocess, so that a crash fails the test and not the test process."""
    address = f"127.0.0.1:{ports.free_port()}"  # bound again each cycle (grpc binds with SO_REUSEADDR)
    result = subprocess.run(
        [sys.executable, "-c", _CYCLES, address, str(cycles)], capture_output=True, text=True, timeout=240
    )
    assert (result.returncode, result.stdout) == (0, f"{cycles} cycles\n"), result.stderr[-2000:]


def test_a_service_registered_by_method_handlers_is_served():
    _run_cycles(1)


def test_stop_does_not_race_the_serving_thread_asking_for_the_next_call():
    # stop()'s shutdown ran beside the serving thread's request_call for the next call, and cygrpc's Server is not
    # safe to call from two threads at once: the process crashed (SIGSEGV) in about half the runs of 100 cycles
    _run_cycles(300)
