"""What the stack exposes: only nginx's port is public; the model servers `serve` starts listen on loopback."""

from __future__ import annotations

import ports
import processes
import serve_stack
from stack_support import model_dir


def test_only_nginx_listens_beyond_loopback(tmp_path):
    with serve_stack.Stack(model_dir(tmp_path), instances=2) as stack:
        low, high = map(int, stack.env["SAGEMAKER_SAFE_PORT_RANGE"].split("-"))
        for port in range(low, high + 1):  # gRPC and REST of both model server instances
            assert ports.listening_addresses(port) == {"127.0.0.1"}, port
        assert ports.listening_addresses(stack.port) == {"0.0.0.0"}  # the public port of the contract
        # the proxy's kept connections stay open: --rest_api_idle_timeout_seconds=0
        processes.wait_for_log(stack, "--listen_address=127.0.0.1", "--rest_api_idle_timeout_seconds=0")
