"""The gunicorn worker class of the app (`SAGEMAKER_GUNICORN_WORKER_CLASS=loop`, the default): one thread serves
every connection of the process through an event loop, each request in a greenlet of its own.

A request's greenlet runs the WSGI app inline. Where the app waits (the model server's answer over the loop's
keep-alive connections, a gRPC call, a slow client taking the answer), the greenlet hands the thread back to the
loop, which serves other connections meanwhile (shared/cooperative.py). No thread changes hands, so a request costs
no lock and no hand-over of the GIL: with a thread per connection (the `connections` class it replaced), those were
about two thirds of a scripted request's system calls (docs/BENCHMARKS.md).

Handler scripts run inline too, as the original's gevent worker runs them, once they have shown that they are quick:
a script function that blocks without waiting through the loop (time.sleep, requests to another service, a file
read) would hold up the whole worker while it runs. So a function runs in threads until it has been quick a number
of times, and goes back to threads for good when it is seen blocking later (shared/cooperative.py): a function that
blocks holds only its own request.

Requests are read as gunicorn's own workers read them (http_connection.py parses, call_app answers): gunicorn's
limits and refusals (as JSON, refusals.py), a request head that must arrive within --keep-alive seconds, a
connection silent that long closed, --worker-connections, and at SIGTERM every connection ended after its current
request within the graceful timeout (an idle connection left a few seconds to its peer to close, see drain).
"""

from __future__ import annotations

import ctypes
import os
import socket
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from gunicorn.workers import base

from ..shared import cooperative
from ..shared.wsgi_call import close
from . import APP_KEEPALIVE_SECONDS
from .http_connection import Connection, base_environ, call_app
from .refusals import closing_error

READ_SIZE = 65536  # larger reads allocate (and fault in) a large buffer per call
LARGE_BODY = 1 << 20  # after a body this large, the worker gives free memory back (_Malloc.trim)
SWEEP_SECONDS = 0.25  # how often idle and slow connections are looked at (and gunicorn's heartbeat kept)
PIPELINE_LIMIT = 8  # complete requests queued on one connection before its reading pauses
LINGER_SECONDS = 5.0  # how long a refused request's remaining bytes are read and dropped (LoopWorker.linger)
DRAIN_IDLE_SECONDS = APP_KEEPALIVE_SECONDS + 1.0  # a stopping worker's wait for its idle peers to close (drain)


class _Malloc:
    """glibc's malloc, told to give back the memory of large bodies. Two causes keep it resident otherwise: glibc
    raises its mmap threshold to the size of each mapped block freed (up to 32 MB), so after one 10 MB body every
    later buffer below that is carved from the threads' malloc arenas; and the arenas keep what is freed. Fixing the
    threshold and trimming after a large body (malloc_trim also releases free pages inside each arena) took a worker
    from 3 to 10 times its size after 40 concurrent 10 MB requests back to within 10%; either alone did not.
    The threshold is fixed at 1 MB, not glibc's initial 128 kB: numpy's temporaries of a few hundred kB (the binary
    path's arrays, JSON written from them) are then reused from the arena instead of being mapped and faulted in
    afresh each time, which made such work 3 to 6 times slower in a worker thread (docs/BENCHMARKS.md). The heap's
    trim threshold is set to glibc's initial 128 kB (the master's frees may have raised it before the fork): raised
    (to 4 or 32 MB), a worker kept up to 1.23x its memory after the burst. Elsewhere (musl, macOS) nothing to do."""

    MMAP_THRESHOLD = 1 << 20
    TRIM_THRESHOLD = 128 << 10

    def __init__(self) -> None:
        self._mallopt: Callable[[int, int], int] | None = None
        self._trim: Callable[[int], int] | None = None
        try:
            libc = ctypes.CDLL(None)
            mallopt, trim = libc.mallopt, libc.malloc_trim
        except (AttributeError, OSError):
            return
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        self._mallopt, self._trim = mallopt, trim

    def fix_thresholds(self) -> None:
        if self._mallopt is not None:
            self._mallopt(-3, self.MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
            self._mallopt(-1, self.TRIM_THRESHOLD)  # M_TRIM_THRESHOLD

    def trim(self) -> None:
        if self._trim is not None:
            self._trim(0)


_malloc = _Malloc()


class Client:
    """One client connection of the loop: its parser, and whether a request greenlet is answering it."""

    __slots__ = (
        "worker",
        "fd",
        "sock",
        "connection",
        "busy",
        "ended",
        "refusal",
        "paused",
        "last_read",
        "head_bytes",
        "waiter",
        "seq",
        "linger_until",
    )

    def __init__(self, worker: LoopWorker, sock: socket.socket, connection: Connection):
        self.worker: LoopWorker | None = worker  # None once closed
        self.fd = sock.fileno()
        self.sock = sock
        self.connection = connection
        self.busy = False  # a request greenlet answers its requests
        self.ended = False  # its end of stream was read: closed once the requests before it are answered
        self.refusal: tuple[int, str, str] | None = None  # answered once the requests before it are
        self.paused = False  # not read until its queue of requests shortens
        self.last_read = time.monotonic()
        self.head_bytes = 0  # bytes of the request head being read
        self.waiter: Any = None  # the greenlet waiting to write (shared/cooperative.Watch's fields)
        self.seq = 0
        self.linger_until: float | None = None  # after a refusal: read and dropped until then (LoopWorker.linger)

    def ready(self, mask: int) -> None:  # an event of its socket
        if self.waiter is not None:  # its greenlet waits to write (cooperative.Hub.wait): only for that
            self.waiter.switch(True)
        elif self.worker is not None:  # (None: closed while the events it was in were handled)
            self.worker.read(self)


class _Listener:
    def __init__(self, worker: LoopWorker, listener: Any):
        self.worker, self.listener, self.name = worker, listener, listener.getsockname()

    def ready(self, mask: int) -> None:
        self.worker.accept(self)


class _Pipe:
    """gunicorn's signal pipe: read, so that a signal wakes the loop once."""

    def __init__(self, fd: int):
        self.fd = fd

    def ready(self, mask: int) -> None:
        try:
            os.read(self.fd, 64)
        except BlockingIOError:
            pass


class LoopWorker(base.Worker):
    """A gunicorn worker: every connection (up to --worker-connections) served by one event loop."""

    def init_process(self) -> None:
        self.clients: dict[int, Client] = {}
        _malloc.fix_thresholds()
        super().init_process()

    def run(self) -> None:
        # gunicorn's settings, read once (each read of cfg goes through its settings table)
        self.limit = self.cfg.worker_connections
        self.keepalive = self.cfg.keepalive
        self.idle_time = float(self.keepalive if self.keepalive > 0 else self.cfg.timeout)  # a head, a slow reader
        hub = self.hub = cooperative.Hub(self.limit)
        self.listeners = [_Listener(self, listener) for listener in self.sockets]
        for entry in self.listeners:
            entry.listener.setblocking(False)
            hub.register(entry.listener, entry)
        self.accepting = True
        hub.register(self.PIPE[0], _Pipe(self.PIPE[0]))
        heartbeat = max(0.1, min(1.0, self.timeout / 2))
        next_sweep = next_heartbeat = 0.0
        while self.alive:
            now = time.monotonic()
            if now >= next_sweep:
                if now >= next_heartbeat:
                    self.notify()
                    next_heartbeat = now + heartbeat
                if self.ppid != os.getppid():
                    self.log.info("Parent changed, shutting down: %s", self)
                    break
                self.sweep(now)
                next_sweep = now + SWEEP_SECONDS
            hub.poll(next_sweep - now)
        self.drain()

    # --- connections ---
    def accept(self, entry: _Listener) -> None:
        limit = self.limit
        for _ in range(16):  # several at once when they queue
            if len(self.clients) >= limit:  # --worker-connections: accept again once one has ended
                self._accepting(False)
                return
            try:
                sock, address = entry.listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            sock.setblocking(False)
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client = Client(self, sock, Connection(sock, base_environ(address, entry.name), self.cfg))
            self.clients[client.fd] = client
            self.hub.register(sock, client)

    def _accepting(self, on: bool) -> None:
        if on == self.accepting or not self.alive:
            return
        self.accepting = on
        for entry in self.listeners:
            if on:
                self.hub.register(entry.listener, entry)
            else:
                self.hub.unregister(entry.listener)

    def read(self, client: Client) -> None:
        try:
            data = client.sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if client.busy:  # closed by its greenlet once the requests before are answered
                client.ended = True
                self._stop_reading(client)
            else:
                self.close(client)
            return
        client.last_read = time.monotonic()
        if client.refusal is not None:
            return  # what follows a refused request is not read
        connection = client.connection
        client.refusal = connection.feed(data, self.log)
        if connection.head_started is None:  # between requests, or reading a body
            client.head_bytes = 0
        else:
            client.head_bytes += len(data)
            if client.head_bytes > connection.max_head and client.refusal is None:
                client.refusal = (431, "Request Header Fields Too Large", "Error parsing headers: 'max buffer headers'")
        if client.busy:
            if len(connection.ready) >= PIPELINE_LIMIT:
                client.paused = True
                self._stop_reading(client)
        elif connection.ready or client.refusal is not None:
            client.busy = True
            self.hub.spawn(partial(self.answer, client))

    def _stop_reading(self, client: Client) -> None:
        self.hub.unregister(client.sock)

    def answer(self, client: Client) -> None:
        """In a request greenlet: answer the connection's complete requests in order, then its refusal if any."""
        ready = client.connection.ready
        while ready:
            environ, keep_alive = ready.pop(0)
            if client.paused and len(ready) < PIPELINE_LIMIT // 2:
                client.paused = False
                self.hub.register(client.sock, client)
            large = environ["wsgi.input"].getbuffer().nbytes >= LARGE_BODY
            answer = call_app(self, environ, keep_alive)
            del environ  # the request and its body go once answered
            if answer is None:
                self.send(client, closing_error(500, "Internal Server Error", ""))
                self.close(client)
                return
            head, body, keep_alive = answer
            if isinstance(body, bytes):
                sent = self.send(client, head, body)
            else:
                sent = self.stream(client, head, body)
            del body
            if large:
                _malloc.trim()
            if not sent or not keep_alive:
                self.close(client)
                return
        if client.refusal is not None:
            if client.refusal[0]:
                self.send(client, closing_error(*client.refusal, client.connection.request_id()))
                self.linger(client)
            else:  # the client went away
                self.close(client)
        elif client.ended:
            self.close(client)
        else:
            client.busy = False

    def linger(self, client: Client) -> None:
        """End a connection after a refusal: shut our side, then read what the client still sends and drop it, until
        it closes or for LINGER_SECONDS (sweep). Closed at once with bytes unread (a body nginx is still writing), the
        connection would be reset, and nginx, failing to write, would answer 502 instead of passing on our answer."""
        if client.ended:
            self.close(client)
            return
        try:
            client.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.close(client)
            return
        if client.paused:
            client.paused = False
            self.hub.register(client.sock, client)
        client.linger_until = time.monotonic() + LINGER_SECONDS
        client.busy = False

    def stream(self, client: Client, head: bytes, pieces: Any) -> bool:
        """Write a streamed answer: its head, then each piece as the app makes it (call_app frames them); False when
        the client is gone or the app failed after the head (its answer ends there, without its last chunk, so that
        the client can tell it from a whole one; the app logged why). The pieces are closed in every case: a
        script's generator, once started, runs its `finally`."""
        try:
            if not self.send(client, head):
                return False
            for piece in pieces:
                if not self.send(client, piece):
                    return False
            return True
        except Exception:  # noqa: BLE001 - the app's error after the head: logged by the app (web/app._streamed)
            return False
        finally:
            close(pieces)

    def send(self, client: Client, head: bytes, body: bytes = b"") -> bool:
        """Write an answer, waiting through the loop while the client does not take it; False when it is gone."""
        try:
            return self.hub.send_all(client.sock, client, head, body, self.idle_time)
        except OSError:
            return False

    def close(self, client: Client) -> None:
        if self.clients.pop(client.fd, None) is None:
            return
        self.hub.unregister(client.sock)
        # The parser and the Connection (its protocol) refer to each other: break the cycle so that reference
        # counting frees both, with any body they still hold, now rather than at the next cycle collection.
        client.connection.parser = None  # type: ignore[assignment]  # (the connection is done with)
        client.connection.ready.clear()
        client.worker = None
        try:
            client.sock.close()
        except OSError:
            pass
        if not self.accepting and len(self.clients) < self.limit:
            self._accepting(True)

    def sweep(self, now: float) -> None:
        """Close connections silent for --keep-alive seconds, those whose request head has taken that long (however
        slowly it trickles in: a client sending a byte now and then cannot hold a connection for ever), and those
        whose linger after a refusal is over."""
        keepalive, head_time = self.keepalive, self.idle_time
        for client in list(self.clients.values()):
            if client.busy:
                continue
            if client.linger_until is not None:
                if now >= client.linger_until:
                    self.close(client)
                continue
            started = client.connection.head_started
            if started is not None:
                if now - started >= head_time:
                    self.close(client)
            elif keepalive > 0 and now - client.last_read >= keepalive:
                self.close(client)

    def drain(self) -> None:
        """Stop accepting; every connection ends after its current request, whose answer says Connection: close.
        An idle connection is left to its peer to close for DRAIN_IDLE_SECONDS, and what it still sends is answered:
        closing it (or shutting its read side) ourselves races with a request nginx may be writing into it that
        moment, a POST nginx does not send again (a 503 to the client, seen at a reload). nginx closes the app's
        idle connections after APP_KEEPALIVE_SECONDS, sooner, so it ends every one itself."""
        for entry in self.listeners:
            self.hub.unregister(entry.listener)
            entry.listener.close()
        started = time.monotonic()
        deadline = started + self.cfg.graceful_timeout
        idle_until: float | None = started + DRAIN_IDLE_SECONDS
        while self.clients and time.monotonic() < deadline:
            self.notify()
            self.hub.poll(0.05)
            if idle_until is not None and time.monotonic() >= idle_until:
                idle_until = None
                for client in list(self.clients.values()):
                    if not client.busy:
                        self.close(client)
