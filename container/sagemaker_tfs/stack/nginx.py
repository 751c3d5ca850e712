"""nginx in front of gunicorn: the config rendered from the template and the settings."""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from string import Template

from ..shared import runtime_dir
from ..config import Settings

TEMPLATE = Path(__file__).with_name("nginx.conf.template")
TEMP_FOLDERS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def _user_directive() -> str:
    # Started by root, nginx would run its workers as `nobody`, who can neither reach gunicorn's socket nor
    # write the temp folders in the runtime folder (0700 when made by mkdtemp): they run as serve's user.
    if os.geteuid() != 0:
        return ""
    return f"user {pwd.getpwuid(0).pw_name};\n"


def render(settings: Settings) -> str:
    return Template(TEMPLATE.read_text()).substitute(
        user_directive=_user_directive(),
        runtime_dir=settings.runtime_dir,
        log_level=settings.nginx_loglevel,
        bind_port=settings.bind_port,
        proxy_read_timeout=settings.nginx_proxy_read_timeout_seconds,
        client_max_body_size=settings.nginx_client_max_body_size,
        multi_model_upstream=MULTI_MODEL_UPSTREAM.substitute(runtime_dir=settings.runtime_dir)
        if settings.multi_model else "",
        multi_model_locations=MULTI_MODEL_LOCATIONS.substitute(management_timeout=management_timeout(settings))
        if settings.multi_model else "",
    )


# Multi-model endpoints: invocations go to gunicorn, the management routes to the registry owner in serve
# (registry/management.py), whose loads may take SAGEMAKER_TFS_WAIT_TIME_SECONDS.
MULTI_MODEL_UPSTREAM = Template("""
    upstream models {
        server unix:${runtime_dir}/models.sock;
    }
""")
MULTI_MODEL_LOCATIONS = Template("""
        location ~ ^/models/[^/]+/invoke$$ {
            proxy_pass http://proxy;
        }
        location = /models {
            proxy_pass http://models;
            proxy_read_timeout ${management_timeout}s;
        }
        location /models/ {
            proxy_pass http://models;
            proxy_read_timeout ${management_timeout}s;
        }
""")


def management_timeout(settings: Settings) -> int:
    """nginx's read timeout of the management routes: a load's wait, or an unload's drain, plus a margin."""
    return max(settings.tfs_wait_time_seconds, settings.gunicorn_timeout_seconds) + 60


def write_config(settings: Settings) -> Path:
    """Render nginx.conf into the runtime folder (with its temp folders); returns its path."""
    runtime = Path(settings.runtime_dir)
    temp = runtime_dir.folder(runtime / "nginx")
    for folder in TEMP_FOLDERS:
        runtime_dir.folder(temp / folder)
    path = runtime / "nginx.conf"
    runtime_dir.write_file(path, render(settings))
    return path


def command(config_path: Path) -> list[str]:
    return ["nginx", "-c", str(config_path), "-e", "stderr"]
