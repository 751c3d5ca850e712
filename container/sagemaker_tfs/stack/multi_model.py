"""What `serve` does differently with SAGEMAKER_MULTI_MODEL=true: no model at start-up, the registry owner
(registry/owner.py) with its two UNIX sockets in the runtime dir (registry.sock for the workers, models.sock for
nginx's /models routes), and restarted model servers brought back to the current models. The workers run the same
app as a single-model endpoint's, with the multi-model routes (app/multi_model.py)."""

from __future__ import annotations

import functools
import logging
import threading
import time
from pathlib import Path

from ..config import ConfigError, Settings
from ..model_client.model_servers import answers
from ..registry.management import create_app
from ..registry.owner import Instance, Owner
from ..registry.publication import Publisher
from ..shared import runtime_dir
from ..web.unix_server import UnixAppServer
from .supervisor import Child, Stack

log = logging.getLogger("serve")


def check_model_root(settings: Settings) -> str:
    """Start-up checks of a multi-model endpoint (nothing is loaded: folders under the root are not models yet);
    the model root's real path."""
    if not Path(settings.model_dir).is_dir():
        raise ConfigError(
            f"the model root {settings.model_dir} of the multi-model endpoint does not exist "
            "(SAGEMAKER_MODEL_DIR, default /opt/ml/models)"
        )
    if settings.tfs_default_model_name:
        log.warning(
            "SAGEMAKER_TFS_DEFAULT_MODEL_NAME=%s is ignored: a multi-model endpoint's requests name their model",
            settings.tfs_default_model_name,
        )
    return str(Path(settings.model_dir).resolve())


class MultiModelStack(Stack):
    def __init__(self, settings: Settings, stopping: threading.Event):
        super().__init__(settings, None, stopping)
        root = Path(settings.model_dir)  # resolved by serve (check_model_root)
        self._deaths: dict[int, int] = {}  # the last exit status of each restarted model server
        self.publisher = Publisher(self.runtime / runtime_dir.REGISTRY_SOCKET)
        self.owner = Owner(
            root=str(root),
            code_dir=settings.multi_model_code_dir,
            instances=[Instance(i, grpc, rest) for i, (grpc, rest) in enumerate(settings.ports())],
            config_file=self.runtime / runtime_dir.MODEL_CONFIG,
            publisher=self.publisher,
            wait_seconds=settings.tfs_wait_time_seconds,
            drain_seconds=settings.gunicorn_timeout_seconds,
            max_models=settings.multi_model_max_models,
            memory_percent=settings.multi_model_memory_limit_percent,
            exit_status=self._exit_status,
        )
        self.management = UnixAppServer(self.runtime / runtime_dir.MODELS_SOCKET, create_app(self.owner), "models-api")

    @property
    def code_dir(self) -> Path:
        return Path(self.settings.multi_model_code_dir)

    serves_models = True  # every model loaded later runs on them

    def start(self) -> None:
        # the sockets before gunicorn: a worker serves nothing before it has the registry
        self.publisher.start()
        self.management.start()
        super().start()

    def _write_model_config(self, config_file: Path) -> None:
        self.owner.write_config_file()  # the ready models (none yet)

    def _wait_for_models(self, deadline: float) -> None:
        for child, (_, rest_port) in zip(self.model_servers, self.settings.ports(), strict=True):
            self._wait(functools.partial(answers, rest_port), child, deadline, "the model server to answer")
        log.info("%d model server(s) up; no model is loaded until POST /models", len(self.model_servers))

    def _ready_message(self) -> str:
        script = self.code_dir / "inference.py"
        return (
            f"multi-model endpoint on port {self.settings.bind_port}, model root {self.settings.model_dir}, "
            f"universal script "
            f"{script if script.is_file() else 'none (models without a script get the default handler)'}"
        )

    def _exit_status(self, index: int) -> int | None:
        """How model server `index` died, if it did since this was last asked."""
        status = self.model_servers[index].exited() if index < len(self.model_servers) else None
        return status if status is not None else self._deaths.pop(index, None)

    def _restarted(self, child: Child, status: int) -> None:
        if child not in self.model_servers:
            return
        index = self.model_servers.index(child)
        self._deaths[index] = status
        threading.Thread(
            target=self._bring_back, args=(index, child), name=f"restore-model-server-{index}", daemon=True
        ).start()

    def _bring_back(self, index: int, child: Child) -> None:
        """Once the restarted instance answers (it loaded the ready models of the config file), bring it up to
        date with the registry."""
        rest_port = self.settings.ports()[index][1]
        deadline = time.monotonic() + self.settings.tfs_wait_time_seconds
        while not answers(rest_port):
            if self.stopping.is_set() or child.exited() is not None or time.monotonic() > deadline:
                return
            self.stopping.wait(0.2)
        self.owner.instance_restarted(index)

    def stop(self) -> None:
        super().stop()
        self.management.shutdown()
        self.publisher.close()
        self.owner.close()
