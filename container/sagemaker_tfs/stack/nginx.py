"""nginx in front of gunicorn: the config rendered from the template and the settings."""

from __future__ import annotations

import grp
import logging
import os
import pwd
import re
import stat
import subprocess
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
        direct_entry=DIRECT_ENTRY if direct else "",
        direct_locations=DIRECT_LOCATIONS.substitute(
            model=direct_model, sniff_size=SNIFF_SIZE, single_tfs_object=SINGLE_TFS_OBJECT,
            server_timing=DIRECT_SERVER_TIMING if settings.server_timing else "",
            metrics_log=DIRECT_METRICS_LOG.substitute(socket=Path(settings.runtime_dir) / direct_metrics.SOCKET)
            if settings.metrics else "")
        if direct else "",
    )


def direct_model(settings: Settings, script: Path | None) -> str | None:
    """The model the direct route calls: the default model of a single-model endpoint whose model servers run, when
    no handler script applies and SAGEMAKER_NGINX_DIRECT_INVOCATIONS is on; else None (no direct route)."""
    if (not settings.nginx_direct_invocations or settings.multi_model or script is not None
            or not settings.model_server_rest_ports):
        return None
    return settings.default_model


# The direct route (README: How a request flows; docs/ARCHITECTURE.md): a POST /invocations that needs nothing the
# default handler does goes from nginx to the default model's :predict, body unchanged. When in doubt, the app.
# - By its headers (the maps of DIRECT_HTTP): a Content-Type of JSON (parameters allowed), an Accept of JSON or
#   anything (no parameters), no custom attribute that names a model, version or method, no Content-Encoding, no
#   chunked body. Such a request goes to @direct, the others to the app as before.
# - By its body (@model_server): one JSON object that starts with a TFS key and is followed by nothing. A flat list,
#   JSON lines or a generic object go to the app without a call to the model server, whose 400 would also cost the
#   client its connection (nginx closes it after an intercepted 400 or 500); and TFS's parser, which stops after
#   the first value, never sees several.
# - Any model server error, or a model server that cannot be reached, sends the same request (nginx kept its body)
#   to the app (@app), so the client gets exactly the app's answer: the codecs stay the one implementation. @app
#   never intercepts the app's answers, so it cannot loop.
# The hops between these locations are error pages (418, 405), nginx's way to hand a request and its body to a named
# location; none of them closes the client's connection.
#
# That body, as nginx's config quotes it (\\ is \, \" is "): blanks, "{", a TFS key, then strings, nested objects
# (recursion) and other bytes up to the closing brace, then blanks only. Possessive: one pass, no backtracking.
SINGLE_TFS_OBJECT = (r'^[ \t\r\n]*\{[ \t\r\n]*\"(?:instances|inputs|examples|signature_name)\"'
                     r'(?:[^{}\"]++|\"(?:[^\"\\\\]++|\\\\.)*+\"'
                     r'|(\{(?:[^{}\"]++|\"(?:[^\"\\\\]++|\\\\.)*+\"|(?1))*+\}))*+'
                     r'\}[ \t\r\n]*\z')
# Bodies up to this size are kept in memory and looked at; larger ones go to the app (SageMaker sends at most 100 MB).
SNIFF_SIZE = "100m"

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
DIRECT_SWITCH = """            recursive_error_pages on;  # the hand-overs are error pages: 418, 405, then 418 or 400
            if ($sagemaker_direct) {
                return 418;  # to @direct (the server's error_page 418): a named location, out of a client's reach
            }
"""
DIRECT_ENTRY = "        error_page 418 = @direct;\n"
DIRECT_LOCATIONS = Template("""        location @direct {
            # The mirror reads the body, whole and in memory, before anything is chosen (its subrequest answers
            # nothing); then empty_gif, which answers GET only, refuses the POST (405) and hands it on.
            client_body_buffer_size ${sniff_size};
            client_body_in_single_buffer on;
            mirror /__body_read;
            empty_gif;
            recursive_error_pages on;
            error_page 405 = @model_server;
        }
        location = /__body_read {
            internal;
            return 204;
        }
        location @model_server {
            # Only one JSON object that starts with a TFS key and is followed by nothing; anything else, or a body
            # too large to be kept in memory (no $$request_body), goes to the app.
            if ($$request_body !~ "${single_tfs_object}") {
                return 418;
            }
            rewrite ^ /v1/models/${model}:predict break;
            proxy_pass http://model_servers;
            add_header X-Amzn-RequestId $$sagemaker_request_id always;
${server_timing}${metrics_log}            proxy_intercept_errors on;
            recursive_error_pages on;  # @app's own failures (gunicorn down) get the server's JSON error pages
            error_page 400 418 500 502 503 504 = @app;
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
