"""nginx in front of gunicorn: the config rendered from the template and the settings."""

from __future__ import annotations

import grp
import logging
import os
import pwd
import stat
from pathlib import Path
from string import Template

from . import direct_metrics
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


def render(settings: Settings, direct_model: str | None = None, user: pwd.struct_passwd | None = None) -> str:
    """nginx.conf; with `direct_model` (the default model, when no handler script applies), the direct route;
    `user`: the workers' user when serve is root (None: root's)."""
    direct = direct_model is not None
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
        direct_http=DIRECT_HTTP.substitute(model_servers="".join(
            f"        server 127.0.0.1:{port};\n" for port in settings.model_server_rest_ports or ()),
            metrics_format=DIRECT_METRICS_FORMAT if settings.metrics else "",
            server_timing_maps=DIRECT_SERVER_TIMING_MAPS if settings.server_timing else "")
        if direct else "",
        direct_switch=DIRECT_SWITCH if direct else "",
        direct_locations=DIRECT_LOCATIONS.substitute(
            model=direct_model, server_timing=DIRECT_SERVER_TIMING if settings.server_timing else "",
            metrics_log=DIRECT_METRICS_LOG.substitute(socket=Path(settings.runtime_dir) / direct_metrics.SOCKET)
            if settings.metrics else "")
        if direct else "",
    )


def direct_model(settings: Settings, script: Path | None) -> str | None:
    """The model the direct route calls: the default model of a single-model endpoint whose model servers run, when
    no handler script applies and SAGEMAKER_NGINX_DIRECT_INVOCATIONS is on; else None (no direct route). Never under
    Batch Transform (SAGEMAKER_BATCH): its MultiRecord batches join records with line breaks, and a model server
    reads only the first JSON value of a body, where the app reads them as JSON lines."""
    if (not settings.nginx_direct_invocations or settings.multi_model or settings.batch or script is not None
            or not settings.model_server_rest_ports):
        return None
    return settings.default_model


# The direct route (README: How a request flows): a POST /invocations that needs nothing the default handler does
# (TFS JSON as it is, JSON answered) goes from nginx to the default model's :predict, body unchanged. When in doubt,
# the app: a Content-Type of JSON (parameters allowed), an Accept of JSON or anything (no parameters), no custom
# attribute that names a model, version or method, no Content-Encoding, no chunked body. Any model server error
# (a body that is not a TFS request gets 400) or an unreachable model server sends the same request, whose body
# nginx kept, to the app (@app), so the client gets exactly the app's answer: the codecs stay the one
# implementation. @app cannot loop: it never intercepts the app's answers.
DIRECT_HTTP = Template("""
    map $$http_content_type $$direct_body {
        default 0;
        "~*^application/json[ \\t]*(;.*)?$$" 1;
    }
    map $$http_accept $$direct_answer {
        default 0;
        "" 1;
        "*/*" 1;
        "~*^application/json$$" 1;
    }
    map $$http_x_amzn_sagemaker_custom_attributes $$direct_call {
        default 1;
        "~*tfs-model-name|tfs-model-version|tfs-method" 0;
    }
    map "$$http_content_encoding$$http_transfer_encoding" $$direct_plain {
        default 0;
        "" 1;
    }
    map "$$request_method:$$direct_body$$direct_answer$$direct_call$$direct_plain" $$sagemaker_direct {
        default 0;
        "POST:1111" 1;
    }
    # The client's request id, else one nginx makes (UUID layout, from $$request_id's 32 random hex digits).
    map $$http_x_amzn_requestid $$sagemaker_request_id {
        "" $$sagemaker_new_request_id;
        default $$http_x_amzn_requestid;
    }
    map $$request_id $$sagemaker_new_request_id {
        "~^(?<a>.{8})(?<b>.{4})(?<c>.{4})(?<d>.{4})(?<e>.{12})$$" "$$a-$$b-$$c-$$d-$$e";
    }
    upstream model_servers {
${model_servers}        keepalive 64;
    }
${metrics_format}${server_timing_maps}""")
DIRECT_SWITCH = """            if ($sagemaker_direct) {
                rewrite ^ /__direct? last;
            }
"""
DIRECT_LOCATIONS = Template("""        location = /__direct {
            internal;
            proxy_pass http://model_servers/v1/models/${model}:predict;
            add_header X-Amzn-RequestId $$sagemaker_request_id always;
${server_timing}${metrics_log}            proxy_intercept_errors on;
            recursive_error_pages on;  # @app's own failures (gunicorn down) get the server's JSON error pages
            error_page 400 500 502 503 504 = @app;
            error_page 404 /__errors/404;  # a client's own request for /__direct, never sent to the app
            error_page 408 /__errors/408;
        }
        location @app {
            rewrite ^ /invocations break;
            proxy_set_header Connection "";
            proxy_set_header Host $$host;
            proxy_set_header X-Amzn-RequestId $$sagemaker_request_id;
            proxy_pass http://proxy;
        }
""")
# SAGEMAKER_SERVER_TIMING: the model server's time to answer (its header) and the time so far, whole milliseconds
# (nginx's resolution), from two regex maps: no arithmetic in nginx.
DIRECT_SERVER_TIMING = ("            add_header Server-Timing "
                        '"model_server;dur=$sagemaker_header_ms, total;dur=$sagemaker_request_ms" always;\n')
DIRECT_SERVER_TIMING_MAPS = """    map $upstream_header_time $sagemaker_header_ms {
        default "";
        "~^0\\.0*(?<ms>[0-9]+)$" $ms;
        "~^(?<s>[1-9][0-9]*)\\.(?<ms>[0-9]{3})$" $s$ms;
    }
    map $request_time $sagemaker_request_ms {
        default "";
        "~^0\\.0*(?<ms>[0-9]+)$" $ms;
        "~^(?<s>[1-9][0-9]*)\\.(?<ms>[0-9]{3})$" $s$ms;
    }
"""
# SAGEMAKER_METRICS: a datagram per request of the direct route to serve's counter (direct_metrics.py); a fallback is
# logged by @app, whose access_log is the server's, and counted by the app.
DIRECT_METRICS_FORMAT = f"    log_format direct_metrics '{direct_metrics.LOG_FORMAT}';\n"
DIRECT_METRICS_LOG = Template("""            access_log /dev/stdout timed;
            access_log syslog:server=unix:${socket},nohostname,tag=direct direct_metrics;
""")


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


def write_config(settings: Settings, direct_model: str | None = None) -> Path:
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
    runtime_dir.write_file(path, render(settings, direct_model, user))
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
