"""A multi-model endpoint's `TargetModel`, as SageMaker treats it: the path of a model artifact relative to the
endpoint's model location, loaded on first use and then routed to. Here the model location is the model root
(SAGEMAKER_MODEL_DIR): the target names a folder under it, served as it is, or a `.tar.gz` archive under it, which
is unpacked once into `<root>/.runtime-api-targets/<digest>/` (a folder this module creates). The model's name in
the registry is the target's digest: an opaque id, as the name SageMaker sends is.

A load that outlasts the invocation timeout goes on in the background; the invocation is ModelNotReadyException
(429), as SageMaker answers while a model is still loading, and a retry finds it loaded."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..config import Settings
from ..registry.owner import Owner
from ..registry.source import LoadError
from ..shared.model_archives import UNPACK_ERRORS, member_filter
from ..shared.model_names import digest
from .errors import RuntimeApiError, internal_failure, model_not_ready, validation

log = logging.getLogger("sagemaker_tfs.runtime_api")

UNPACKED = ".runtime-api-targets"  # hidden: never taken for a model by anything that lists the root


class LoadFailed(Exception):
    """The registry refused or failed the load with `status`: the invocation's ModelError quotes `message`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class NotLoadedHere(Exception):
    """The target is not loaded as far as this process knows: `serve`, which loads targets, is to take the request."""


class Targets(Protocol):
    """What InvokeEndpoint asks of a multi-model endpoint's targets: LoadedTargets in an app worker, TargetModels
    in `serve`."""

    def model_for(self, target: str) -> str: ...


def registry_name(target: str) -> str:
    """The registry's name of a target: its digest, an opaque id as SageMaker's own."""
    return "target-" + digest(target)


class LoadedTargets:
    """An app worker's targets (realtime.serve_in): those its registry view (`is_ready`) routes; for any other,
    NotLoadedHere, and the request goes to `serve`'s TargetModels, which loads it."""

    def __init__(self, is_ready: Callable[[str], bool]):
        self.is_ready = is_ready

    def model_for(self, target: str) -> str:
        name = registry_name(target)
        if not self.is_ready(name):
            raise NotLoadedHere(target)
        return name


class TargetModels:
    """`serve`'s targets: loaded through the registry's owner on first use."""

    def __init__(self, owner: Owner, settings: Settings):
        self.owner = owner
        self.root = Path(owner.root)
        self.timeout = settings.local_runtime_timeout_seconds
        self._loads: dict[str, concurrent.futures.Future[str]] = {}  # name -> the load in progress
        self._lock = threading.Lock()  # guards _loads: taken only when a target is not loaded yet

    def model_for(self, target: str) -> str:
        """The registry name of `target` (checked by the service model's constraints: members.py), loaded first if
        it is not; RuntimeApiError when it cannot be."""
        name = registry_name(target)
        if self.owner.is_ready(name):
            return name
        with self._lock:
            load = self._loads.get(name)
            if load is None or load.done():
                load = self._loads[name] = concurrent.futures.Future()
                threading.Thread(target=self._load, args=(name, target, load), name=f"load-{name}", daemon=True).start()
        try:
            load.result(self.timeout)
        except concurrent.futures.TimeoutError:
            raise model_not_ready(f"Model '{target}' is still loading; retry the request") from None
        return name

    def _load(self, name: str, target: str, done: concurrent.futures.Future[str]) -> None:
        try:
            url = self._url(target)
            log.info("TargetModel %s: loading %s as model %s", target, url, name)
            self.owner.load({"model_name": name, "url": url})
        except LoadError as exc:
            if exc.status == 409:  # loaded meanwhile (another client's first request)
                done.set_result(name)
            elif exc.status == 404:
                done.set_exception(
                    validation(
                        f"Could not find model data for TargetModel '{target}' under the "
                        f"model root {self.root}: {exc.message}"
                    )
                )
            else:
                done.set_exception(LoadFailed(exc.status, exc.message))  # the caller's ModelError
        except RuntimeApiError as exc:
            done.set_exception(exc)
        except Exception as exc:  # a bug: the invocation gets an InternalFailure, the log the traceback
            log.exception("TargetModel %s: load failed", target)
            done.set_exception(internal_failure(f"loading TargetModel '{target}': {exc}"))
        else:
            done.set_result(name)

    def _url(self, target: str) -> str:
        """The folder to load for `target`, confined to the model root (the registry checks the real path too)."""
        path = Path(os.path.normpath(self.root / target))
        if os.path.isabs(target) or ".." in Path(target).parts or self.root not in path.parents:
            raise validation(f"TargetModel '{target}' must be a path relative to the model root, without '..'")
        if path.is_dir():
            return str(path)
        if path.is_file() and target.endswith((".tar.gz", ".tgz")):
            return str(self._unpacked(path, target))
        raise validation(
            f"Could not find model data for TargetModel '{target}': {path} is not a folder or a "
            ".tar.gz archive under the model root"
        )

    def _unpacked(self, archive: Path, target: str) -> Path:
        """The archive unpacked into a folder of ours, once; a partial unpack never becomes that folder."""
        unpacked = self.root / UNPACKED
        try:
            unpacked.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            raise validation(f"cannot unpack TargetModel '{target}': {exc}") from None
        if unpacked.is_symlink() or not unpacked.is_dir() or unpacked.stat().st_uid != os.getuid():
            raise validation(f"cannot unpack TargetModel '{target}': {unpacked} is not a folder of this user")
        folder = unpacked / digest(target)
        if folder.is_dir():
            return folder
        partial = Path(tempfile.mkdtemp(dir=unpacked, prefix=".partial-"))
        try:
            with tarfile.open(archive, "r:*") as tar:
                tar.extractall(partial, filter=member_filter)  # no absolute path, no link leading out
            os.replace(partial, folder)
        except UNPACK_ERRORS as exc:
            raise validation(f"cannot unpack TargetModel '{target}': {exc}") from None
        finally:
            if partial.exists():
                shutil.rmtree(partial, ignore_errors=True)
        return folder
