"""The served models: their versions' states, the loaded servables, and how a request finds one.

Writers (the startup load, the polling threads, HandleReloadConfigRequest and config file polling) replace whole
dictionaries; request threads only read them, so finding a servable takes no lock. A removed version's session
closes when its last request drops it. A reload swaps the model list under a lock and loads the models it added
outside it, so that reloads adding different models load them in parallel and models a reload leaves unchanged keep
serving. A model a reload removes keeps its versions' last states (END) for the status API, as TFS's servable state
monitor does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..shared.error_codes import Code, ServingError, invalid_argument, not_found
from ..shared.version_states import VersionState
from .model_config import ModelConfig, ModelConfigError, list_versions, load_config_file
from .servable import Servable

log = logging.getLogger(__name__)

Loader = Callable[[str, int, Path], Servable]


@dataclass(frozen=True)
class VersionStatus:
    version: int
    state: VersionState
    error: ServingError | None = None


class Model:
    def __init__(self, config: ModelConfig):
        self.config = config
        self.statuses: dict[int, VersionStatus] = {}
        self.servables: dict[int, Servable] = {}
        self.latest: Servable | None = None
        self.attempted: set[int] = set()  # versions loaded or failed while continuously on disk
        self.missing_logged = False
        self.settled = threading.Event()  # set once every version had its load attempt
        self.added_generation = -1  # the reload generation that added it

    def set_status(self, status: VersionStatus) -> None:
        self.statuses = {**self.statuses, status.version: status}

    def set_servables(self, servables: dict[int, Servable]) -> None:
        self.servables = servables
        self.latest = servables[max(servables)] if servables else None


class ServableManager:
    def __init__(
        self,
        configs: list[ModelConfig],
        loader: Loader,
        max_load_retries: int = 0,
        retry_interval_seconds: float = 60.0,
    ):
        self.models = {config.name: Model(config) for config in configs}
        # the last states of models a reload removed: TFS's servable state monitor keeps reporting them (END)
        self.removed: dict[str, dict[int, VersionStatus]] = {}
        self._loader = loader
        self._retries = max_load_retries
        self._retry_interval = retry_interval_seconds
        self._stopping = threading.Event()
        self._reload_lock = threading.Lock()  # one model-list swap at a time; never taken by requests
        self._generation = -1

    # ---------------------------------------------------------------------------------------- requests

    def resolve(self, name: str, version: int | None = None, label: str | None = None) -> Servable:
        """The servable a request names (latest version by default); TFS's errors when there is none."""
        model = self.models.get(name)
        if label is not None:
            if model is None or label not in model.config.labels:
                raise invalid_argument(f"Unrecognized servable version label: {label}")
            version = model.config.labels[label]
        if version is None:
            servable = model.latest if model is not None else None
            if servable is None:
                raise not_found(f"Servable not found for request: Latest({name})")
            return servable
        servable = model.servables.get(version) if model is not None else None
        if servable is None:
            raise not_found(f"Servable not found for request: Specific({name}, {version})")
        return servable

    def version_statuses(self, name: str, version: int | None = None) -> list[VersionStatus]:
        """The status of every version of a model (highest first), or of one version."""
        model = self.models.get(name)
        statuses = model.statuses if model is not None else self.removed.get(name, {})
        if not statuses:
            raise not_found(f"Could not find any versions of model {name}")
        if version is not None:
            if version not in statuses:
                raise not_found(f"Could not find version {version} of model {name}")
            return [statuses[version]]
        return [statuses[v] for v in sorted(statuses, reverse=True)]

    def status_proto(self, name: str, version: int | None = None) -> Any:
        """version_statuses as TFS's GetModelStatusResponse (REST prints it as JSON)."""
        from tensorflow_serving.apis import get_model_status_pb2

        response = get_model_status_pb2.GetModelStatusResponse()
        for status in self.version_statuses(name, version):
            entry = response.model_version_status.add(version=status.version, state=status.state)
            entry.status.SetInParent()  # TFS always reports the status, OK included
            if status.error is not None:
                entry.status.error_code = int(status.error.code)
                entry.status.error_message = status.error.message
        return response

    # ---------------------------------------------------------------------------------------- loading

    def stop(self) -> None:
        self._stopping.set()

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()

    def refresh(self) -> None:
        """Bring every model in line with its folder: load new aspired versions, then unload dropped ones."""
        with self._reload_lock:  # a model is loaded by one thread at a time: a reload's or the scan's
            for model in self.models.values():
                if not self._stopping.is_set():
                    self._refresh(model)

    def _refresh(self, model: Model) -> None:
        config = model.config
        try:
            on_disk = list_versions(config.base_path)
        except OSError as exc:
            if not model.missing_logged:
                log.error(
                    "Could not find base path %s for servable %s with error %s",
                    config.base_path,
                    config.name,
                    exc.strerror or exc,
                )
                model.missing_logged = True
            model.settled.set()
            return
        aspired = config.policy.select(list(on_disk))
        if not aspired and not model.missing_logged:
            log.warning(
                "No versions of servable %s found under base path %s. Did you forget to name your leaf "
                "directory as a number (eg. '/1/')?",
                config.name,
                config.base_path,
            )
            model.missing_logged = True
        model.attempted &= set(aspired)
        for version in sorted(set(aspired) - model.attempted):
            model.attempted.add(version)
            self._load(model, version, on_disk[version])
        dropped = [v for v in model.servables if v not in aspired]
        for version in dropped:
            log.info("Unloading servable version {name: %s version: %d}", config.name, version)
            model.set_status(VersionStatus(version, VersionState.UNLOADING))
            model.set_servables({v: s for v, s in model.servables.items() if v != version})
            model.set_status(VersionStatus(version, VersionState.END))
        model.settled.set()

    def _load(self, model: Model, version: int, path: Path) -> None:
        name = model.config.name
        model.set_status(VersionStatus(version, VersionState.LOADING))
        for attempt in range(self._retries + 1):
            try:
                servable = self._loader(name, version, path)
            except ServingError as exc:
                error = exc
            except Exception as exc:  # an unexpected loader failure still only fails this version
                log.exception("Loading servable {name: %s version: %d} raised", name, version)
                error = ServingError(Code.UNKNOWN, f"{type(exc).__name__}: {exc}")
            else:
                if self.models.get(name) is not model:  # a reload removed the model while it loaded
                    log.info(
                        "Dropping servable version {name: %s version: %d}: the model was removed while it loaded",
                        name,
                        version,
                    )
                    servable.close()
                    return
                model.set_servables({**model.servables, version: servable})
                model.set_status(VersionStatus(version, VersionState.AVAILABLE))
                log.info("Successfully loaded servable version {name: %s version: %d} from %s", name, version, path)
                return
            if attempt < self._retries:
                log.warning(
                    "Loading servable {name: %s version: %d} failed (attempt %d of %d), retrying in %g s: %s",
                    name,
                    version,
                    attempt + 1,
                    self._retries + 1,
                    self._retry_interval,
                    error.message,
                )
                if self._stopping.wait(self._retry_interval):
                    break
        model.set_status(VersionStatus(version, VersionState.END, error))
        log.error(
            "Loading servable {name: %s version: %d} failed: %s: %s", name, version, error.code.name, error.message
        )

    def reload(
        self, configs: list[ModelConfig], generation: int | None = None, timeout_seconds: float | None = None
    ) -> None:
        """HandleReloadConfigRequest: `configs` replaces the model list (TFS semantics). Models whose config is
        unchanged keep their servables; models absent from it are unloaded; new ones are loaded, and the call
        returns once they are, raising the first load error (as TFS's ReloadConfig waits for them).

        `generation` orders concurrent reloads by when their lists were made (the sender's counter, gRPC metadata
        `sagemaker-tfs-config-generation`): a list older than one already applied changes nothing, and the call
        still waits for the models it names that the newer list kept."""
        with self._reload_lock:
            current = self.models
            for config in configs:
                old = current.get(config.name)
                if old is not None and old.config.platform != config.platform:
                    raise invalid_argument(
                        f"Illegal to change a model's platform. For model {config.name} platform "
                        f"was {old.config.platform} and new platform requested is {config.platform}"
                    )
            if generation is not None and generation < self._generation:
                # a newer list was applied first: it added what this one would have; wait for those
                awaited = [
                    current[c.name]
                    for c in configs
                    if c.name in current
                    and current[c.name].config == c
                    and current[c.name].added_generation > generation
                ]
                added: list[Model] = []
            else:
                if generation is not None:
                    self._generation = generation
                models = {}
                for config in configs:
                    old = current.get(config.name)
                    models[config.name] = old if old is not None and old.config == config else Model(config)
                added = [m for m in models.values() if current.get(m.config.name) is not m]
                for model in added:
                    model.added_generation = self._generation
                awaited = []  # the models it added are loaded below; others' loads are their reloads' business
                self.models = models
                for name, model in current.items():
                    if models.get(name) is not model:
                        self._unload(model)
                self.removed = {
                    **{name: model.statuses for name, model in current.items() if name not in models},
                    **{name: states for name, states in self.removed.items() if name not in models},
                }
        for model in added:
            self._refresh(model)
            if not model.statuses:
                raise not_found(f"Could not find base path {model.config.base_path} for servable {model.config.name}")
        for model in awaited:
            if not model.settled.wait(timeout_seconds):
                raise ServingError(Code.DEADLINE_EXCEEDED, f"model {model.config.name} is still loading")
        for model in [*added, *awaited]:
            for status in model.statuses.values():
                if status.error is not None:
                    raise ServingError(status.error.code, status.error.message)

    def _unload(self, model: Model) -> None:
        for version in sorted(model.servables):
            log.info("Unloading servable version {name: %s version: %d}", model.config.name, version)
        model.set_servables({})
        model.statuses = {
            v: s if s.state == VersionState.END else VersionStatus(v, VersionState.END)
            for v, s in model.statuses.items()
        }

    def poll_forever(self, interval_seconds: float) -> None:
        """Re-scan the model folders every interval until stop(); run in a daemon thread."""
        self._every(interval_seconds, self.refresh, "scanning model folders failed")

    def poll_config_file_forever(self, path: str, interval_seconds: float) -> None:
        """--model_config_file_poll_wait_seconds: re-read the model config file every interval and apply it (TFS
        logs a file it cannot read or apply and keeps serving what it has); run in a daemon thread."""

        def apply() -> None:
            try:
                configs = load_config_file(path)
            except ModelConfigError as exc:
                log.error("Failed to read ModelServerConfig file: %s", exc)
                return
            try:
                self.reload(configs)
            except ServingError as exc:
                log.error("PollFilesystemAndReloadConfig failed to ReloadConfig: %s", exc.message)

        self._every(interval_seconds, apply, "re-reading the model config file failed")

    def _every(self, interval_seconds: float, action: Callable[[], None], failure: str) -> None:
        while not self._stopping.wait(interval_seconds):
            try:
                action()
            except Exception:  # keep polling: a transient file-system error must not stop updates
                log.exception(failure)

    def summary(self) -> list[str]:
        lines = []
        for name, model in self.models.items():
            states = ", ".join(
                f"{s.version} {s.state}" + (f" ({s.error.message})" if s.error else "")
                for s in (model.statuses[v] for v in sorted(model.statuses, reverse=True))
            )
            lines.append(f"{name}: {states or 'no versions'}")
        return lines
