"""The test helpers' free ports lie below the kernel's ephemeral range, where no outgoing connection (not even
one connected to itself) can take a server's port between a run choosing it and the server binding it."""

from __future__ import annotations

import socket

import ports
import serve_stack


def test_free_ports_lie_below_the_ephemeral_range_and_are_free():
    ephemeral_low, _ = ports.ephemeral_port_range()
    for _ in range(50):
        port = ports.free_port()
        assert ports.LOWEST_PORT <= port < ephemeral_low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_free_port_ranges_lie_below_the_ephemeral_range_and_are_free():
    ephemeral_low, _ = ports.ephemeral_port_range()
    for _ in range(20):
        low, high = ports.free_port_range(5)
        assert high - low == 4
        assert ports.LOWEST_PORT <= low and high < ephemeral_low
        socks = [socket.socket() for _ in range(5)]
        try:
            for port, sock in zip(range(low, high + 1), socks, strict=True):
                sock.bind(("127.0.0.1", port))
        finally:
            for sock in socks:
                sock.close()


def test_a_stack_s_ports_lie_below_the_ephemeral_range(tmp_path):
    stack = serve_stack.Stack(tmp_path, instances=2)
    assert len(stack.model_server_ports) == 4
    assert max(stack.port, *stack.model_server_ports) < ports.ephemeral_port_range()[0]


def test_a_port_is_never_handed_out_twice_in_a_run():
    """A test that picks a port for a setting, then starts a stack that picks its own, gets different ports, even
    though the first is still free."""
    given = [ports.free_port() for _ in range(200)]
    for _ in range(50):
        low, high = ports.free_port_range(4)
        given.extend(range(low, high + 1))
    assert len(given) == len(set(given))
