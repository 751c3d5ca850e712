"""The registry's snapshots, sent by the owner (`serve`) to every gunicorn worker over a UNIX socket, and the
workers' acknowledgements. Lines of JSON, in both directions:

    worker -> owner   {"hello": <pid>}                                   once, on connecting
    owner -> worker   {"generation": g, "models": [{"name", "load_id", "state", "url", "script"}, ...]}
    worker -> owner   {"generation": g, "errors": {name: "why its script cannot be used", ...}}

A worker applies each snapshot in order (imports the scripts of new models, forgets the code of models that
left, routes the `ready` ones, waits for in-flight invocations of models that left) and then acknowledges it. The
owner's `publish` returns once every connected worker acknowledged, so that a load's 200 is sent only when every
worker routes the model and an unload's only when every worker answers 404. A worker that connects gets the
current snapshot first and serves nothing before it has applied it (Subscriber).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypedDict

from ..shared import runtime_dir
from ..shared.str_enum import StrEnum

log = logging.getLogger("sagemaker_tfs.multi_model")

Message = dict[str, Any]


class ModelState(StrEnum):
    """A model's "state" in a snapshot, and in the owner's registry: loading -> ready -> unloading."""

    LOADING = "loading"  # the workers import its code; the model servers load it
    READY = "ready"  # routed by every worker
    UNLOADING = "unloading"  # in the owner only: never in a snapshot


# The models the workers and the model servers hold: a snapshot lists them, a reload sends them.
PUBLISHED = (ModelState.LOADING, ModelState.READY)


class PublishedModel(TypedDict):
    """One model of a snapshot, as the owner sends it (a worker reads it back as a plain Message)."""

    name: str
    load_id: int
    state: ModelState  # sent as its value
    url: str
    script: str | None


class Snapshot(TypedDict):
    generation: int
    models: list[PublishedModel]


class _Worker:
    """The owner's side of one worker's connection."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.pid: int | None = None
        self.acks: dict[int, dict[str, str]] = {}
        self.closed = False

    def send(self, message: Snapshot) -> None:
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError:
            self.closed = True


class Publisher:
    """The owner's end: accepts workers, sends them every snapshot, waits for their acknowledgements."""

    def __init__(self, path: Path):
        self.path = path
        self._workers: list[_Worker] = []
        self._changed = threading.Condition()
        self._generation = 0
        self._current: Snapshot = {"generation": 0, "models": []}
        self._awaited: set[int] = set()  # generations a publish() is waiting for
        self._server: socket.socket | None = None

    def start(self) -> None:
        runtime_dir.remove(self.path)
        self._server = server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.path))
        server.listen(64)
        threading.Thread(target=self._accept, args=(server,), name="registry-publisher", daemon=True).start()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        with self._changed:
            for worker in self._workers:
                worker.sock.close()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                sock, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(_Worker(sock),), name="registry-worker", daemon=True).start()

    def _serve(self, worker: _Worker) -> None:
        reader = worker.sock.makefile("rb")
        try:
            hello = json.loads(reader.readline() or b"{}")
            worker.pid = hello.get("hello")
            with self._changed:  # the current snapshot first, then every later one, in order
                worker.send(self._current)
                self._workers.append(worker)
            for line in reader:
                ack = json.loads(line)
                with self._changed:
                    if ack["generation"] in self._awaited:
                        worker.acks[ack["generation"]] = ack.get("errors") or {}
                        self._changed.notify_all()
        except (OSError, ValueError) as exc:
            log.debug("worker %s: %s", worker.pid, exc)
        finally:
            with self._changed:
                worker.closed = True
                if worker in self._workers:
                    self._workers.remove(worker)
                self._changed.notify_all()
            worker.sock.close()

    def publish(self, models: list[PublishedModel], deadline: float | None) -> dict[str, str]:
        """Send the snapshot to every worker; wait until each acknowledged it (or left). Returns the workers'
        errors by model name; TimeoutError when the deadline passes first."""
        with self._changed:
            self._generation += 1
            generation = self._generation
            self._current = {"generation": generation, "models": models}
            self._awaited.add(generation)
            waiting = list(self._workers)
            for worker in waiting:
                worker.send(self._current)
            try:
                while True:
                    pending = [w for w in waiting if not w.closed and generation not in w.acks]
                    if not pending:
                        break
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(
                            f"worker(s) {', '.join(str(w.pid) for w in pending)} did not apply the model list in time"
                        )
                    self._changed.wait(remaining)
            finally:
                self._awaited.discard(generation)
                errors: dict[str, str] = {}
                for worker in waiting:
                    errors.update(worker.acks.pop(generation, {}))
            return errors


class Subscriber:
    """A worker's end: applies every snapshot with `apply(message) -> errors by name` and acknowledges it."""

    def __init__(self, path: Path, apply: Callable[[Message], dict[str, str]]):
        self.path = path
        self._apply = apply
        self._sock: socket.socket | None = None
        self._closed = False

    def close(self) -> None:
        """Stop following (an app closed in-process; a gunicorn worker just exits)."""
        self._closed = True
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def start(self, timeout: float) -> None:
        """Connect, apply the current snapshot (before the worker serves anything), then follow in a thread."""
        deadline = time.monotonic() + timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(str(self.path))
                break
            except OSError as exc:
                sock.close()
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cannot reach the model registry at {self.path}: {exc}") from None
                time.sleep(0.1)  # start-up only: serve opens the socket before it starts gunicorn
        self._sock = sock
        sock.sendall(json.dumps({"hello": os.getpid()}).encode() + b"\n")
        reader = sock.makefile("rb")
        self._follow_one(sock, reader)
        threading.Thread(target=self._follow, args=(sock, reader), name="registry-subscriber", daemon=True).start()

    def _follow_one(self, sock: socket.socket, reader: BinaryIO) -> None:
        line = reader.readline()
        if not line:
            raise ConnectionResetError("the model registry closed the connection")
        message = json.loads(line)
        errors = self._apply(message)
        sock.sendall(json.dumps({"generation": message["generation"], "errors": errors}).encode() + b"\n")

    def _follow(self, sock: socket.socket, reader: BinaryIO) -> None:
        try:
            while True:
                self._follow_one(sock, reader)
        except Exception as exc:  # noqa: BLE001 - whatever broke the registry: stop the worker
            # without the registry this worker would route stale models: let gunicorn replace it
            if self._closed:
                sock.close()
                return
            log.error("worker %d lost the model registry (%s: %s); stopping it", os.getpid(), type(exc).__name__, exc)
            os.kill(os.getpid(), signal.SIGTERM)
