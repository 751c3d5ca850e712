"""nginx in front of gunicorn: the config rendered from the template and the settings."""

from __future__ import annotations

import grp
import logging
import os
import pwd
import random
import re
import stat
import subprocess
import textwrap
from pathlib import Path
from string import Template

from ..config import Settings
from ..errors import StartupError
from ..shared import runtime_dir
from ..shared.headers import REQUEST_ID_HEADER, SESSION_ID_HEADER
from ..web import sessions
from ..wsgi_server import APP_KEEPALIVE_SECONDS
from . import direct_metrics, direct_route, runtime_route

log = logging.getLogger("serve")
TEMPLATE = Path(__file__).with_name("nginx.conf.template")  # with its snippets, nginx-<name>.template beside it
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
    raise StartupError(
        f"serve runs as root, and nginx's workers must not: none of the users "
        f"{', '.join(WORKER_USERS)} exists (create one, or run serve as another user)"
    )


def user_directive(user: pwd.struct_passwd | None) -> str:
    if os.geteuid() != 0:
        return ""
    if user is None:  # nginx started by root would run its workers as nobody: say who they run as
        user = pwd.getpwuid(0)
    return f"user {user.pw_name} {grp.getgrgid(user.pw_gid).gr_name};\n"


def render(
    settings: Settings, direct_model: str | None, nginx_version: tuple[int, ...], user: pwd.struct_passwd | None = None
) -> str:
    """nginx.conf for that nginx version; with `direct_model` (the default model, when no handler script applies),
    the direct route; `user`: the workers' user when serve is root (None: root's)."""
    direct = direct_model is not None
    app_headers = _app_headers(nginx_version)
    runtime = Path(settings.runtime_dir)
    return Template(TEMPLATE.read_text()).substitute(
        user_directive=user_directive(user),
        runtime_dir=settings.runtime_dir,
        log_level=settings.nginx_loglevel,
        bind_port=settings.bind_port,
        proxy_read_timeout=settings.nginx_proxy_read_timeout_seconds,
        client_max_body_size=settings.nginx_client_max_body_size,
        gunicorn_socket=runtime / runtime_dir.GUNICORN_SOCKET,
        app_keepalive_timeout=APP_KEEPALIVE_SECONDS,
        multi_model_upstream=snippet("multi-model-upstream", models_socket=runtime / runtime_dir.MODELS_SOCKET)
        if settings.multi_model
        else "",
        multi_model_locations=snippet("multi-model-locations", management_timeout=management_timeout(settings))
        if settings.multi_model
        else "",
        runtime_api_http=runtime_route.log_maps(settings) if settings.local_runtime_api else "",
        runtime_api_location=_runtime_api_location(settings, direct, app_headers) if settings.local_runtime_api else "",
        direct_http=_direct_http(settings, direct_model) if direct_model is not None else _session_map(runtime),
        invocations=_invocations(app_headers, direct),
        direct_entry=DIRECT_ENTRY if direct else "",
        direct_locations=_direct_locations(settings, app_headers) if direct else "",
    )


def _runtime_api_location(settings: Settings, direct: bool, app_headers: str) -> str:
    """The runtime API's routes, on serve's socket; InvokeEndpoint in a location of its own, which logs it
    (runtime_route.py) and sends it to the app's workers with the headers /invocations sends (`app_headers`: a
    repeated line read as on the direct route), or down the direct route where /invocations would take it;
    a multi-model worker hands a target it does not route to serve (@runtime_api), which loads it. The read timeout
    covers a target's load and the invocation, each bounded by SAGEMAKER_LOCAL_RUNTIME_TIMEOUT_SECONDS."""
    timeout = 2 * settings.local_runtime_timeout_seconds + 30
    serve = f"http://unix:{Path(settings.runtime_dir) / runtime_dir.RUNTIME_API_SOCKET}"
    switch = textwrap.indent(_switch("sagemaker_runtime_direct") if direct else snippet("session-switch"), "    ")
    headers = textwrap.indent(app_headers, "    ")
    realtime = snippet(
        "runtime-api-realtime", timeout=timeout, direct_switch=switch, app_headers=headers, upstream="http://app"
    )
    hand_over = snippet("runtime-api-serve", upstream=serve, timeout=timeout) if settings.multi_model else ""
    location = snippet(
        "runtime-api-location",
        upstream=serve,
        timeout=timeout,
        realtime_location=realtime,
        stream_buffers=STREAM_BUFFERS,
    )
    return location + hand_over


def _switch(variable: str) -> str:
    """The hand-over of a location's request to the direct route (@direct) when `variable` is 1."""
    return snippet("direct-switch", switch=variable)


def snippet(name: str, **values: object) -> str:
    """The snippet nginx-<name>.template (beside the main template) with its ${...} values; $$ is nginx's $."""
    return Template(TEMPLATE.with_name(f"nginx-{name}.template").read_text()).substitute(values)


def direct_model(settings: Settings, script: Path | None) -> str | None:
    """The model the direct route calls: the default model of a single-model endpoint whose model servers run, when
    no handler script applies and SAGEMAKER_NGINX_DIRECT_INVOCATIONS is on; else None (no direct route)."""
    if (
        not settings.nginx_direct_invocations
        or settings.multi_model
        or script is not None
        or not settings.model_server_rest_ports
    ):
        return None
    return settings.default_model


def _app_headers(nginx_version: tuple[int, ...]) -> str:
    """The proxy_set_header lines of a location that sends /invocations to the app. A location that sets one
    header sets them all: nginx then drops the server's list (Connection, Host)."""
    lines = {"Connection": '""', "Host": "$host"}
    if nginx_version < direct_route.JOINED_HEADER_LINES:  # the line nginx read, so that both routes read one
        lines.update({name: direct_route.http_variable(name) for name in direct_route.HANDED_OVER})
    return "".join(f"            proxy_set_header {name} {value};\n" for name, value in lines.items())


# The direct route (direct_route.py holds its rules; docs/ARCHITECTURE.md draws it). Every hop between its
# locations is an error page, nginx's way to hand a request and its body to a named location: 418 from /invocations
# to @direct, 405 from @direct to @model_server, then 418 (a body the rule refuses), or a model server error that the
# app could answer otherwise, to @app. @app never intercepts the app's answers, so it cannot loop.
def _direct_http(settings: Settings, model: str) -> str:
    upstream = "".join(f"        server 127.0.0.1:{port};\n" for port in settings.model_server_rest_ports or ())
    return (
        direct_route.header_maps()
        + direct_route.target_maps(model)
        + _request_id_maps()
        + f"    upstream model_servers {{\n{upstream}        keepalive 64;\n    }}\n"
        + (DIRECT_METRICS_FORMAT if settings.metrics else "")
        + (direct_route.SERVER_TIMING_MAPS if settings.server_timing else "")
        + (runtime_route.maps(settings) + OPERATION_MODEL_SERVER_MAP if settings.local_runtime_api else "")
    )


def _invocations(app_headers: str, direct: bool) -> str:
    """/invocations: down the direct route (no script), else to the app's workers, a session's request to the worker
    that opened it (_session_map; sessions and streamed answers are a script's)."""
    switch = _switch("sagemaker_direct") if direct else snippet("session-switch")
    buffers = "" if direct else STREAM_BUFFERS
    return snippet("invocations", direct_switch=switch, app_headers=app_headers, stream_buffers=buffers)


# A streamed answer (X-Accel-Buffering: no) passes through nginx's first buffer alone: at its default 4 KiB, nginx
# writes a large part 4 KiB at a time, at half the rate of the same bytes whole (BENCHMARKS). The others must be as
# large (nginx's rule on its busy buffers). Only where an answer may stream: the direct route keeps the default.
STREAM_BUFFERS = "            proxy_buffer_size 64k;\n            proxy_buffers 8 64k;\n"


def _session_map(runtime: Path) -> str:
    """$sagemaker_session_worker: the socket of the worker whose pid begins the request's session id (web/sessions.py;
    each worker listens on its own, gunicorn_settings.post_worker_init), empty for a request without one."""
    return snippet(
        "session-map",
        session_header=direct_route.http_variable(SESSION_ID_HEADER),
        pid_pattern=sessions.PID_PATTERN,
        random_pattern=sessions.RANDOM_PATTERN,
        worker_socket=runtime_dir.worker_socket(runtime, "$sagemaker_session_pid"),
    )


DIRECT_ENTRY = "        error_page 418 = @direct;\n"
# @model_server for /invocations; InvokeEndpoint's own (OPERATION_MODEL_SERVER) hands every model server error to the
# app, which answers it as the operation's ModelError. A request of the operation has a variant (runtime_route.py).
MODEL_SERVER, OPERATION_MODEL_SERVER = "@model_server", "@operation_model_server"
OPERATION_MODEL_SERVER_MAP = (
    "    map $sagemaker_runtime_variant $sagemaker_model_server {\n"
    f'        "" {MODEL_SERVER};\n        default {OPERATION_MODEL_SERVER};\n    }}\n'
)
REQUEST_ID_MAPS = "request-id-maps"


def _request_id_maps() -> str:
    """The client's request id, else one nginx makes in a version 4 UUID's layout, as the app makes its own (web/
    request.py): 48 random bits drawn here, at each start, then the worker's pid, the connection's number (counted
    across the workers) and the request's on it, 7, 7 and 4 decimal digits. Unique within a run, and with the pid
    beyond a restart of nginx on the same config; no secret. nginx's $request_id draws 16 bytes from OpenSSL per
    request: 6 to 12 µs of the direct route's latency at c1, 5 to 8% of its rate at c8 (BENCHMARKS)."""
    digits = f"{random.getrandbits(52):013x}"
    return snippet(
        REQUEST_ID_MAPS,
        client_request_id=direct_route.http_variable(REQUEST_ID_HEADER),
        drawn=f"{digits[:8]}-{digits[8:12]}",
        variant="89ab"[int(digits[12], 16) & 3],  # RFC 4122's variant bits
    )


def _direct_locations(settings: Settings, app_headers: str) -> str:
    metrics_log = (
        f"{TIMED_LOG}            access_log syslog:server=unix:"
        f"{Path(settings.runtime_dir) / direct_metrics.SOCKET},nohostname,tag=direct direct_metrics;\n"
        if settings.metrics
        else ""
    )
    server_timing = direct_route.SERVER_TIMING if settings.server_timing else ""
    runtime = settings.local_runtime_api  # the locations carry InvokeEndpoint too (runtime_route.py)
    locations: dict[str, tuple[int, ...]] = {MODEL_SERVER: direct_route.INVOCATIONS_TO_APP}
    if runtime:
        locations[OPERATION_MODEL_SERVER] = direct_route.OPERATION_TO_APP
    model_servers = "".join(
        snippet(
            "direct-model-server",
            location=location,
            single_tfs_object=direct_route.quoted(direct_route.SINGLE_TFS_OBJECT),
            body_refused=direct_route.BODY_REFUSED,
            model_server_path=direct_route.MODEL_SERVER_PATH,
            request_id_header=REQUEST_ID_HEADER,
            server_timing=server_timing,
            metrics_log=metrics_log,
            runtime_variant_header=runtime_route.VARIANT_HEADER_LINE if runtime else "",
            runtime_log=("" if settings.metrics else TIMED_LOG) + runtime_route.LOG_LINE if runtime else "",
            to_app=" ".join(str(status) for status in to_app),
        )
        for location, to_app in locations.items()
    )
    return snippet(
        "direct-locations",
        sniff_buffer=direct_route.SNIFF_BUFFER,
        model_server="$sagemaker_model_server" if runtime else MODEL_SERVER,
        model_server_locations=model_servers,
        request_id_header=REQUEST_ID_HEADER,
        app_headers=app_headers,
        app_log=TIMED_LOG + runtime_route.LOG_LINE if runtime else "",
        app_uri=runtime_route.APP_URI if runtime else "/invocations",
    )


TIMED_LOG = "            access_log /dev/stdout timed;\n"  # the server's access log, where a location has its own
# SAGEMAKER_METRICS: a datagram per request of the direct route to serve's counter (direct_metrics.py); a fallback is
# logged by @app, whose access_log is the server's, and counted by the app.
DIRECT_METRICS_FORMAT = f"    log_format direct_metrics '{direct_metrics.LOG_FORMAT}';\n"


def management_timeout(settings: Settings) -> int:
    """nginx's read timeout of the management routes: a load's wait, or an unload's drain, plus a margin."""
    return max(settings.tfs_wait_time_seconds, settings.gunicorn_timeout_seconds) + 60


def write_config(settings: Settings, direct_model: str | None, nginx_version: tuple[int, ...]) -> Path:
    """Render nginx.conf for that nginx into the runtime folder (with its temp folders); returns its path.

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
    runtime_dir.write_file(path, render(settings, direct_model, nginx_version, user))
    return path


def _open_to(user: pwd.struct_passwd, runtime: Path, temp: Path) -> bool:
    closed = [str(parent) for parent in runtime.parents if not os.stat(parent).st_mode & stat.S_IXOTH]
    if closed:
        log.warning(
            "nginx's workers run as root: %s cannot reach the runtime folder %s (%s may not be entered by "
            "others); a SAGEMAKER_RUNTIME_DIR it can reach (the default in /tmp) lets them run as %s",
            user.pw_name,
            runtime,
            ", ".join(closed),
            user.pw_name,
        )
        return False
    for folder in (runtime, temp):
        os.chown(folder, -1, user.pw_gid)
        os.chmod(folder, 0o710)
    for name in TEMP_FOLDERS:
        os.chown(temp / name, user.pw_uid, user.pw_gid)
    return True


# nginx's -e (1.19.5 and later): where it logs before it has read its config. Older ones (Ubuntu 22.04's 1.18, the
# tensorflow/serving 2.20 bases') open their compiled-in file instead, which the image links to stderr.
ERROR_LOG_FLAG = (1, 19, 5)


def version(text: str | None = None) -> tuple[int, ...]:
    """nginx's version from what `nginx -v` prints ("nginx version: nginx/1.18.0"; run when `text` is None)."""
    if text is None:
        text = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr
    found = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", text)
    if found is None:
        raise StartupError(f"cannot tell nginx's version from `nginx -v`: {text.strip()!r}")
    return tuple(int(part) for part in found.groups())


def command(config_path: Path, nginx_version: tuple[int, ...]) -> list[str]:
    args = ["nginx", "-c", str(config_path)]
    return [*args, "-e", "stderr"] if nginx_version >= ERROR_LOG_FLAG else args
