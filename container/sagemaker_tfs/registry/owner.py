"""The one registry of a multi-model endpoint, owned by `serve`: which models are loaded, from which url.

Loads and unloads of one name take turns in arrival order; different names proceed in parallel. A load runs
the checks of docs/multi-model.md §3 in order, then has every gunicorn worker import the model's script
(publication.py), then replaces the model list of every model server instance with TFS's
HandleReloadConfigRequest, then publishes the model as ready: its 200 goes out once every worker routes it. A
failure at any step removes every trace (worker modules, model server entry). The model server config file always
lists the ready models, so that a restarted instance starts with them; `instance_restarted` then brings it up to
date.
"""

from __future__ import annotations

import base64
import binascii
import collections
import concurrent.futures
import contextlib
import itertools
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from ..model_client.model_servers import ModelServerError, model_status
from ..shared import runtime_dir
from ..shared.model_names import name_problem
from ..shared.reload_generation import GENERATION_METADATA
from . import limits
from .publication import PUBLISHED, ModelState, PublishedModel, Publisher
from .source import LoadError, ModelSource, check_url_form, inspect

log = logging.getLogger("sagemaker_tfs.multi_model")

RELOAD_METHOD = "/tensorflow.serving.ModelService/HandleReloadConfigRequest"
LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX = 100, 1000


@dataclass
class Entry:
    name: str
    url: str
    source: ModelSource
    load_id: int
    state: ModelState = ModelState.LOADING


@dataclass(frozen=True)
class Instance:
    index: int
    grpc_port: int
    rest_port: int


# Aliases at module level: in Owner's body, `list` is Owner.list
ReloadFailures = list[tuple[Instance, grpc.RpcError]]  # by instance
PublishedModels = list[PublishedModel]
VersionStatus = list[Any]  # model_version_status as the model server wrote it


def not_loaded(name: str) -> LoadError:
    return LoadError(404, f"Model {name} is not loaded yet.")


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def reload_request(config: model_server_config_pb2.ModelServerConfig) -> bytes:
    """A serialized ReloadConfigRequest{config = 1} (built by hand: tensorflow_serving.apis imports TensorFlow)."""
    body = config.SerializeToString()
    return b"\x0a" + _varint(len(body)) + body


class Owner:
    def __init__(
        self,
        *,
        root: str,
        code_dir: str,
        instances: list[Instance],
        config_file: Path,
        publisher: Publisher,
        wait_seconds: int,
        drain_seconds: int,
        max_models: int,
        memory_percent: int,
        exit_status: Callable[[int], int | None] = lambda index: None,
        in_use_percent: Callable[[], int] = limits.memory_in_use_percent,
    ):
        self.root = root
        self.code_dir = code_dir
        self.instances = instances
        self.config_file = config_file
        self.publisher = publisher
        self.wait_seconds = wait_seconds
        self.drain_seconds = drain_seconds
        self.max_models = max_models
        self.memory_percent = memory_percent
        self.exit_status = exit_status  # the exit status of model server i when it has died, else None
        self.in_use_percent = in_use_percent
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()  # guards _entries, _turns and the config generation (never on invocations)
        self._turns: dict[str, collections.deque[threading.Event]] = {}
        self._load_ids = itertools.count(1)
        self._generation = 0
        self._channels = [grpc.insecure_channel(f"127.0.0.1:{i.grpc_port}") for i in instances]
        self._reload_calls = [channel.unary_unary(RELOAD_METHOD) for channel in self._channels]
        self._pool = ThreadPoolExecutor(max(4, 2 * len(instances)), thread_name_prefix="model-server-reload")
        self.write_config_file()

    # ---------------------------------------------------------------------------------------- routes

    def load(self, body: object) -> dict[str, str]:
        """POST /models: the checks of docs/multi-model.md §3 in order; LoadError with the status and text of the
        first that fails."""
        if not isinstance(body, dict):
            raise LoadError(400, 'request body must be a JSON object with "model_name" and "url"')
        name = body.get("model_name")
        if name is None:
            raise LoadError(400, 'missing "model_name"')
        problem = name_problem(name)
        if problem:
            raise LoadError(400, f"invalid model_name '{name}': {problem}")
        url = check_url_form(body.get("url"))
        with self._turn(name):
            if name in self._entries:
                raise LoadError(409, f"Model {name} is already loaded.")
            source = inspect(name, url, self.root)
            with self._lock:
                refusal = limits.refusal(len(self._entries), self.max_models, self.memory_percent, self.in_use_percent)
                if refusal:
                    raise LoadError(507, refusal)
                entry = self._entries[name] = Entry(name, url, source, next(self._load_ids))
            try:
                self._bring_up(entry, time.monotonic() + self.wait_seconds)
            except BaseException:
                self._forget(entry)
                raise
        first = self.instances[0]
        log.info("loaded model %s from %s (versions %s)", name, url, ", ".join(map(str, source.versions)))
        return {
            "success": f"Successfully loaded model {name}, listening on rest port {first.rest_port} and grpc "
            f"port {first.grpc_port}."
        }

    def unload(self, name: str) -> dict[str, str]:
        """DELETE /models/{name}: out of every worker at once, in-flight invocations finish, then out of the model
        servers."""
        with self._turn(name):
            entry = self._entries.get(name)
            if entry is None or entry.state != ModelState.READY:
                raise not_loaded(name)
            entry.state = ModelState.UNLOADING
            # workers drop the route, wait for their in-flight invocations of it, forget its modules, then ack
            try:
                self.publisher.publish(self._snapshot(), time.monotonic() + self.drain_seconds + 30)
            except TimeoutError as exc:  # a worker that hangs is gunicorn's to kill; the unload goes on
                log.error("unloading model %s: %s", name, exc)
            with self._lock:
                del self._entries[name]
            self.write_config_file()
            for error in self._reload_everywhere(time.monotonic() + self.wait_seconds):
                log.error("unloading model %s: %s", name, error)
        log.info("unloaded model %s", name)
        return {"success": f"Successfully unloaded model {name}."}

    def is_ready(self, name: str) -> bool:
        """Whether `name` is loaded and routed (no lock: a read of the current entry)."""
        entry = self._entries.get(name)
        return entry is not None and entry.state == ModelState.READY

    def describe(self, name: str) -> dict[str, Any]:
        entry = self._entries.get(name)
        if entry is None or entry.state != ModelState.READY:
            raise not_loaded(name)
        return {"modelName": name, "modelUrl": entry.url, "model_version_status": self._version_status(name)}

    def list(self, limit: str | None, token: str | None) -> dict[str, Any]:
        """GET /models: ready models by name (code-point order), pages of `limit` after the token's name."""
        size = LIST_LIMIT_DEFAULT
        if limit is not None:
            if not (limit.isascii() and limit.isdigit() and 1 <= int(limit) <= LIST_LIMIT_MAX):
                raise LoadError(400, f"invalid limit '{limit}': must be an integer from 1 to {LIST_LIMIT_MAX}")
            size = int(limit)
        after = None
        if token is not None:
            try:
                after = base64.urlsafe_b64decode(token.encode("ascii") + b"=" * (-len(token) % 4)).decode()
            except (UnicodeError, ValueError, binascii.Error):
                after = None
            if after is None or name_problem(after):
                raise LoadError(400, f"invalid next_page_token '{token}'")
        names = sorted(name for name, entry in list(self._entries.items()) if entry.state == ModelState.READY)
        if after is not None:
            names = [name for name in names if name > after]
        page = names[:size]
        answer: dict[str, Any] = {
            "models": [{"modelName": n, "modelUrl": self._entries[n].url} for n in page if n in self._entries]
        }
        if len(names) > size:
            answer["nextPageToken"] = base64.urlsafe_b64encode(page[-1].encode()).decode().rstrip("=")
        return answer

    # ---------------------------------------------------------------------------------------- a load's steps

    def _bring_up(self, entry: Entry, deadline: float) -> None:
        name = entry.name
        try:
            errors = self.publisher.publish(self._snapshot(), deadline)  # step 9: every worker imports its code
        except TimeoutError:
            raise self._timed_out(name) from None
        if name in errors:
            raise LoadError(500, f"Failed to load model {name}: {errors[name]}")
        failures = self._reload_everywhere(deadline)  # step 10
        if failures:
            raise self._load_failure(name, failures)
        entry.state = ModelState.READY
        self.write_config_file()
        try:
            self.publisher.publish(self._snapshot(), deadline)
        except TimeoutError:
            raise self._timed_out(name) from None

    def _timed_out(self, name: str) -> LoadError:
        return LoadError(408, f"Failed to load model {name}: timed out after {self.wait_seconds} seconds")

    def _load_failure(self, name: str, failures: ReloadFailures) -> LoadError:
        instance, error = failures[0]
        code = error.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return self._timed_out(name)
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return LoadError(507, f"Memory exhausted: {error.details()}")
        if code == grpc.StatusCode.UNAVAILABLE:
            status = self._exit_status_soon(instance.index)
            if status == -signal.SIGKILL:
                return LoadError(
                    507,
                    f"Memory exhausted: model server {instance.index} was killed (SIGKILL, as the "
                    f"kernel's OOM killer does) while loading model {name}",
                )
            if status is not None:
                return LoadError(
                    500,
                    f"Failed to load model {name}: model server {instance.index} exited with "
                    f"status {status} while loading it",
                )
        return LoadError(500, f"Failed to load model {name}: {error.details()}")

    def _exit_status_soon(self, index: int) -> int | None:
        """The exit status of a model server whose connection just broke (it may take a moment to be reaped)."""
        deadline = time.monotonic() + 2
        while (status := self.exit_status(index)) is None and time.monotonic() < deadline:
            time.sleep(0.05)  # a failed load only: never on a request path
        return status

    def _forget(self, entry: Entry) -> None:
        """Remove every trace of a failed load: the entry, the workers' modules, the model server entries."""
        with self._lock:
            if self._entries.get(entry.name) is entry:
                del self._entries[entry.name]
        self.write_config_file()
        try:
            self.publisher.publish(self._snapshot(), time.monotonic() + self.drain_seconds + 30)
        except TimeoutError as exc:
            log.error("removing model %s after its failed load: %s", entry.name, exc)
        for instance, error in self._reload_everywhere(time.monotonic() + self.wait_seconds):
            log.warning(
                "removing model %s from model server %d after its failed load: %s",
                entry.name,
                instance.index,
                error.details(),
            )

    # ---------------------------------------------------------------------------------------- model servers

    def _config(self, states: tuple[ModelState, ...]) -> model_server_config_pb2.ModelServerConfig:
        config = model_server_config_pb2.ModelServerConfig()
        config.model_config_list.SetInParent()
        for entry in sorted(self._entries.values(), key=lambda e: e.name):
            if entry.state in states:
                model = config.model_config_list.config.add()
                model.name = entry.name
                model.base_path = str(entry.source.base_path)
                model.model_platform = "tensorflow"
                model.model_version_policy.specific.versions.extend(entry.source.versions)
        return config

    def write_config_file(self) -> None:
        """The model server config file lists the ready models: what a restarted instance starts with."""
        with self._lock:
            runtime_dir.write_file(self.config_file, text_format.MessageToString(self._config((ModelState.READY,))))

    def _reload_everywhere(self, deadline: float, only: Sequence[Instance] | None = None) -> ReloadFailures:
        """Send every instance the models being loaded or ready; the failures, by instance (none: every
        instance has loaded them)."""
        with self._lock:
            self._generation += 1
            metadata = ((GENERATION_METADATA, str(self._generation)),)
            request = reload_request(self._config(PUBLISHED))
        timeout = max(0.001, deadline - time.monotonic())
        # wait_for_ready: an instance restarted meanwhile is waited for (its channel reconnects), not a failure
        futures = {
            self._pool.submit(
                self._reload_calls[i.index], request, timeout=timeout, metadata=metadata, wait_for_ready=True
            ): i
            for i in (only or self.instances)
        }
        # the first failure decides (a killed instance is known at once, while the others may still be loading)
        done, _ = concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
        return [(futures[f], f.exception()) for f in done if f.exception() is not None]

    def _version_status(self, name: str) -> VersionStatus:
        try:
            return model_status(self.instances[0].rest_port, name, timeout=5).entries
        except ModelServerError as exc:
            log.warning("model version status of %s: %s", name, exc)
            return []

    def instance_restarted(self, index: int) -> None:
        """After serve restarted model server `index` (it started with the ready models of the config file):
        bring it up to date, and drop the models it could not load back, so that the next invocation is a 404
        and SageMaker loads them again."""
        instance = self.instances[index]
        for _, failure in self._reload_everywhere(time.monotonic() + self.wait_seconds, only=[instance]):
            log.error("model server %d could not load the models back: %s", index, failure.details())
        for name, entry in list(self._entries.items()):
            if entry.state == ModelState.READY and not self._available(instance, name):
                with self._turn(name):
                    if self._entries.get(name) is entry:
                        log.error("dropping model %s: model server %d could not load it again", name, index)
                        self._forget(entry)

    def _available(self, instance: Instance, name: str) -> bool:
        try:
            return model_status(instance.rest_port, name, timeout=5).all_available
        except ModelServerError:
            return False

    # ---------------------------------------------------------------------------------------- helpers

    def _snapshot(self) -> PublishedModels:
        """What the workers get: the models being loaded (to import their code) and the ready ones (to route)."""
        with self._lock:
            return [
                PublishedModel(
                    name=e.name,
                    load_id=e.load_id,
                    state=e.state,
                    url=str(e.source.real),
                    script=str(e.source.script) if e.source.script else None,
                )
                for e in self._entries.values()
                if e.state in PUBLISHED
            ]

    @contextlib.contextmanager
    def _turn(self, name: str) -> Iterator[None]:
        """Loads and unloads of one name, one after another in arrival order."""
        ticket = threading.Event()
        with self._lock:
            queue = self._turns.setdefault(name, collections.deque())
            queue.append(ticket)
            if len(queue) == 1:
                ticket.set()
        ticket.wait()
        try:
            yield
        finally:
            with self._lock:
                queue.popleft()
                if queue:
                    queue[0].set()
                else:
                    del self._turns[name]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for channel in self._channels:
            channel.close()
