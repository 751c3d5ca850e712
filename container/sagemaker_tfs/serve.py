"""`serve`: the container's entrypoint. Starts and supervises the model servers, gunicorn and nginx.

Each start-up step fails fast with one message that says what to fix. The start-up order, the supervision of the
children and the draining at SIGTERM are told once, in docs/ARCHITECTURE.md ("Processes"); this module does them
in that order: settings and model tree, GPUs, the runtime folder (claimed and locked), the model servers and the
requirements, gunicorn, nginx.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from .config import ConfigError, Settings
from .errors import StartupError
from .shared import build_info, gpus, logs, model_tree, process_title, runtime_dir
from .shared.handler_contract import is_toolkit_script, script_loads_model
from .shared.model_tree import ModelTree, ModelTreeError
from .stack import commands, reaper
from .stack.supervisor import Stack, StopRequested

log = logging.getLogger("serve")


def prepare(given: Settings | None = None, front: bool = True) -> tuple[Settings, ModelTree | None]:
    """The settings (os.environ's unless given), resolved for the children (Settings.resolved, with the GPUs CUDA
    sees, counted once here), and the validated model tree (None for a multi-model endpoint: nothing is loaded at
    start-up). Logs the one line that says which GPU each worker and model server uses. `front`: nginx is needed
    (not for sagemaker_tfs.testing's in-process endpoints, which have no nginx)."""
    settings = Settings.from_env() if given is None else given
    if (
        settings.gunicorn_worker_class in ("gevent", "eventlet", "tornado")
        and importlib.util.find_spec(settings.gunicorn_worker_class) is None
    ):
        raise ConfigError(
            f"SAGEMAKER_GUNICORN_WORKER_CLASS={settings.gunicorn_worker_class} needs the "
            f"{settings.gunicorn_worker_class} package, which is not installed; use sync or gthread"
        )
    if front and not shutil.which("nginx"):
        raise StartupError("nginx is not installed (apt-get install nginx, or run scripts/install.sh)")
    if settings.multi_model:
        from .stack.multi_model import check_model_root

        commands.model_server_base_command()
        model_root = check_model_root(settings)
        found = gpus.find(settings.nvidia_smi_timeout_seconds)
        settings = settings.resolved(model_root, None, found.devices)
        log.info("%s", commands.gpu_line(settings, found.how, False, model_servers=True))
        return settings, None
    tree = model_tree.find_models(
        settings.model_dir,
        settings.tfs_default_model_name,
        settings.program,
        lambda script: is_toolkit_script(script, settings.inference_contract),
    )
    if tree.models:  # an inference toolkit script without SavedModels needs no model server
        commands.model_server_base_command()
    loads_model = tree.script is not None and script_loads_model(tree.script, settings.inference_contract)
    found = gpus.find(settings.nvidia_smi_timeout_seconds)
    settings = settings.resolved(str(tree.model_dir.resolve()), tree.default_model, found.devices, loads_model)
    log.info("%s", commands.gpu_line(settings, found.how, loads_model, model_servers=bool(tree.models)))
    return settings, tree


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"]:  # SageMaker runs `docker run <image> serve`; the entrypoint is serve already
        args = args[1:]
    if args and args[0] in ("-h", "--help"):
        print(
            __doc__.strip()
            + "\n\n--reload: restart the app's workers when code/ changes, as SAGEMAKER_RELOAD=true (development)."
            + "\nConfiguration: SAGEMAKER_* environment variables (docs/settings.md lists them)."
        )
        return 0
    if args == ["--reload"]:  # read by prepare()'s Settings.from_env() and handed to the workers like any setting
        os.environ["SAGEMAKER_RELOAD"] = "true"
        args = []
    if args:
        print(
            f"serve: error: unexpected arguments {' '.join(args)}; configure with SAGEMAKER_* variables",
            file=sys.stderr,
        )
        return 2
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logs.formatter(logs.format_from_env(), "%(asctime)s %(levelname)s serve: %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    logs.quiet_tensorflow()  # for every child: the model servers, and gunicorn's workers if a script imports it
    process_title.set_title("serve")  # ps shows `serve`, not `python .../serve`; before any child starts
    log.info("sagemaker-tfs %s starting", build_info.describe())
    stopping = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: draining and stopping", signal.Signals(signum).name)
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # SIGHUP: the terminal closed
        signal.signal(signum, on_signal)
    stack: Stack | None = None
    runtime_api = None  # SAGEMAKER_LOCAL_RUNTIME_API's operations, in this process
    children_reaper = reaper.start()  # kills the children if serve itself is killed (SIGKILL, OOM killer)
    try:
        settings, tree = prepare()
        lock = runtime_dir.claim(Path(settings.runtime_dir))  # held until we exit
        if settings.multi_model:
            from .stack.multi_model import MultiModelStack

            stack = MultiModelStack(settings, stopping)
        else:
            stack = Stack(settings, tree, stopping)
        if settings.local_runtime_api:
            from .runtime_api.server import RuntimeApi

            runtime_api = RuntimeApi(settings, stack.runtime, getattr(stack, "owner", None))
            runtime_api.start()
        watcher = None
        if settings.reload and settings.multi_model:
            log.warning("SAGEMAKER_RELOAD is not supported on a multi-model endpoint: ignored")
        elif settings.reload:
            # its first look at code/ is taken before the workers import it: a save made while they start is seen
            watcher = stack.code_watcher()
        stack.start()
        if watcher is not None:
            watcher.start()
        stack.supervise()
    except StopRequested:
        pass
    except (ConfigError, ModelTreeError, StartupError) as exc:
        log.error("cannot start: %s", exc)
        return 1
    finally:
        if runtime_api is not None:
            runtime_api.drain()  # while nginx still answers: the asynchronous invocations in flight finish
        if stack is not None:
            stack.stop()
        if runtime_api is not None:
            runtime_api.close()
        children_reaper.close()
    lock.close()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
