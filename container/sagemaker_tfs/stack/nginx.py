"""nginx in front of gunicorn: the config rendered from the template and the settings."""

from __future__ import annotations

import grp
import logging
import os
import pwd
import stat
from pathlib import Path
from string import Template

from ..config import Settings
from ..errors import StartupError
from ..shared import runtime_dir

log = logging.getLogger("serve")
TEMPLATE = Path(__file__).with_name("nginx.conf.template")
TEMP_FOLDERS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


# nginx's workers when serve runs as root: the first of these users that exists (never root)
WORKER_USERS = ("nobody", "www-data", "nginx")


def worker_user() -> pwd.struct_passwd | None:
    """The unprivileged user nginx's workers run as when serve is root (None when serve is not root: nginx then
    cannot change user, and its workers run as serve's user)."""
    if os.geteuid() != 0:
        return None
    for name in WORKER_USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            pass
    raise StartupError(f"serve runs as root, and nginx's workers must not: none of the users "
                       f"{', '.join(WORKER_USERS)} exists (create one, or run serve as another user)")


def _user_directive(user: pwd.struct_passwd | None) -> str:
    if os.geteuid() != 0:
        return ""
    if user is None:  # nginx started by root would run its workers as nobody: say who they run as
        user = pwd.getpwuid(0)
    return f"user {user.pw_name} {grp.getgrgid(user.pw_gid).gr_name};\n"


def render(settings: Settings, user: pwd.struct_passwd | None = None) -> str:
    """nginx.conf; `user`: the workers' user when serve is root (None: root's)."""
    return Template(TEMPLATE.read_text()).substitute(
        user_directive=_user_directive(user),
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
    """Render nginx.conf into the runtime folder (with its temp folders); returns its path.

    When serve is root, nginx's workers run as worker_user(): its group may traverse the runtime folder (0710, to
    reach gunicorn's socket and the management socket, which it may connect to) and the temp folders are the
    worker user's; no one else may enter, and only serve's user may write the folder. When a parent folder keeps
    that user out (root's 0700 $XDG_RUNTIME_DIR), the workers run as root, with a warning."""
    runtime = Path(settings.runtime_dir)
    temp = runtime_dir.folder(runtime / "nginx")
    for folder in TEMP_FOLDERS:
        runtime_dir.folder(temp / folder)
    user = worker_user()
    if user is not None and not _open_to(user, runtime, temp):
        user = None
    path = runtime / "nginx.conf"
    runtime_dir.write_file(path, render(settings, user))
    return path


def _open_to(user: pwd.struct_passwd, runtime: Path, temp: Path) -> bool:
    closed = [str(parent) for parent in runtime.parents if not os.stat(parent).st_mode & stat.S_IXOTH]
    if closed:
        log.warning("nginx's workers run as root: %s cannot reach the runtime folder %s (%s may not be entered by "
                    "others); a SAGEMAKER_RUNTIME_DIR it can reach (the default in /tmp) lets them run as %s",
                    user.pw_name, runtime, ", ".join(closed), user.pw_name)
        return False
    for folder in (runtime, temp):
        os.chown(folder, -1, user.pw_gid)
        os.chmod(folder, 0o710)
    for folder in TEMP_FOLDERS:
        os.chown(temp / folder, user.pw_uid, user.pw_gid)
    return True


def command(config_path: Path) -> list[str]:
    return ["nginx", "-c", str(config_path), "-e", "stderr"]
