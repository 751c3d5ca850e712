"""The image itself: built with scripts/build-image.sh and run as SageMaker runs it (`podman run IMAGE serve`, the
model mounted read-only at /opt/ml/model, port 8080), as root, with a read-only root file system, and as a
non-root user. test_serving_image.py tests the image's Python environment without a container; this test proves
the recipe: the build, the image's files, users and signals.

No registry of images is reachable here, so the base is a stand-in built from Debian's packages
(standin_base.sh: Debian 12 with pyenv's CPython 3.10, the Python of the tensorflow/serving:2.20.0 bases), and
its `tensorflow_model_server` is the embedded model server of this test's own environment, mounted read-only
with that environment (a stand-in used only by this test). The stand-in base's tarball, the wheelhouse and
podman's storage are kept in the repo's build/ folder, keyed by their inputs, so that a rerun builds little.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import clients
import image_support
import model_dirs
import paths
import ports
import pytest
import sagemaker_tfs
from direct_route_cases import APP, ATTRIBUTE_FORMS, ATTRIBUTES, BODIES, MODEL_SERVER
from sagemaker_tfs.shared import build_info

pytestmark = pytest.mark.slow

BUILD = paths.REPO / "build"
PODMAN = BUILD / "podman"
STANDIN_SCRIPT = Path(__file__).with_name("standin_base.sh")
STANDIN_PYTHON = Path("/root/.pyenv/versions/3.10.13")  # pyenv's, on this kind of machine
IMAGE = "localhost/sagemaker-tfs:container-test"
JSON_BODY = '{"instances": [1.0, 2.0, 5.0]}'
# The model server's own JSON, passed through by the default handler.
PRETTY_PREDICTIONS = '{\n    "predictions": [3.5, 4.0, 5.5\n    ]\n}'
READ_ONLY_MESSAGE = (
    "cannot write the runtime folder /tmp/sagemaker-tfs-0-8080 (Read-only file system): set SAGEMAKER_RUNTIME_DIR "
    "to a writable folder of serve's user (with a read-only root file system: on a tmpfs, e.g. docker run "
    "--read-only --tmpfs /tmp)"
)


def limits() -> list[str]:
    """podman's --ulimit options: this process's hard limits, capped (a container may not set more; podman's
    defaults fail on this kind of machine, as scripts/build-image.sh says)."""
    files = min(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536)
    processes = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 32768)
    return ["--ulimit", f"nofile={files}:{files}", "--ulimit", f"nproc={processes}:{processes}"]


def podman_env() -> dict[str, str]:
    """podman's storage in build/podman (overlay; the machine's default storage is left alone)."""
    conf = PODMAN / "storage.conf"
    text = f'[storage]\ndriver = "overlay"\ngraphroot = "{PODMAN}/storage"\nrunroot = "{PODMAN}/run"\n'
    if not conf.is_file() or conf.read_text() != text:
        PODMAN.mkdir(parents=True, exist_ok=True)
        conf.write_text(text)
    return {**os.environ, "CONTAINERS_STORAGE_CONF": str(conf)}


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(
        ["podman", "--runtime", "runc", *args], capture_output=True, text=True, timeout=timeout, env=podman_env()
    )
    if check:
        assert result.returncode == 0, f"podman {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result


# A base whose Python is too old (Debian 11's 3.9, as tensorflow/serving:2.19.0 has Ubuntu 20.04's 3.8).
OLD_BASE = ["mmdebstrap", "--quiet", "--format=tar", "--variant=minbase", "--include=python3", "bullseye"]


def imported(name: str, command: list[str], inputs: bytes = b"") -> str:
    """localhost/sagemaker-tfs-standin:<name>-<key>: the tarball `command OUT.tar` makes, imported, both kept
    (build/standin, podman's storage) under a key of the command and its other inputs."""
    key = hashlib.sha256("\0".join(command).encode() + inputs).hexdigest()[:16]
    image = f"localhost/sagemaker-tfs-standin:{name}-{key}"
    if podman("image", "exists", image, check=False).returncode != 0:
        tarball = BUILD / "standin" / f"{name}-{key}.tar"
        if not tarball.is_file():
            tarball.parent.mkdir(parents=True, exist_ok=True)
            for stale in tarball.parent.glob(f"{name}-*.tar"):  # of other inputs
                stale.unlink()
            result = subprocess.run([*command, str(tarball)], capture_output=True, text=True, timeout=900)
            assert result.returncode == 0, result.stdout + result.stderr
        podman(
            "import",
            "--change",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            str(tarball),
            image,
            timeout=600,
        )
    return image


@pytest.fixture(scope="module")
def standin_base() -> str:
    return imported("py310", [str(STANDIN_SCRIPT), str(STANDIN_PYTHON)], STANDIN_SCRIPT.read_bytes())


@pytest.fixture(scope="module")
def image(standin_base) -> str:
    result = subprocess.run(
        [paths.REPO / "scripts" / "build-image.sh", "cpu", IMAGE],
        capture_output=True,
        text=True,
        timeout=900,
        env={**podman_env(), "BASE_IMAGE": standin_base},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.endswith(f"built {IMAGE} from {standin_base}\n")
    podman("image", "prune", "--force")  # the layers of earlier builds, so that build/podman does not grow
    return IMAGE


def test_a_base_with_an_older_python_fails_the_build_at_its_first_step():
    base = imported("bullseye", OLD_BASE)
    result = subprocess.run(
        [paths.REPO / "scripts" / "build-image.sh", "cpu", "localhost/sagemaker-tfs:too-old"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**podman_env(), "BASE_IMAGE": base},
    )
    assert result.returncode != 0
    assert (
        "cannot build: the base image's Python is 3.9.2 (/usr/bin/python3); sagemaker-tfs needs Python >= 3.10: "
        "use tensorflow/serving:2.20.0 or newer (GPU: tensorflow/serving:2.20.0-gpu), or a base with Python 3.10 "
        "to 3.13\n"
    ) in result.stderr
    steps = [line for line in result.stdout.splitlines() if line.startswith("STEP ")]
    assert [step for step in steps if " RUN " in step] == [steps[-1]]  # the first RUN, which checks the Python
    assert "check-base-python.sh --install" in steps[-1]


def test_the_image_holds_what_serve_runs_on_and_no_build_settings(image):
    config = json.loads(podman("image", "inspect", "--format", "{{json .Config}}", image).stdout)
    assert config["Entrypoint"] == ["serve"]
    assert sorted(name.split("=", 1)[0] for name in config["Env"]) == [
        "PATH",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
    ]  # no INSTALL_PROFILE, DEBIAN_FRONTEND, wheelhouse
    assert config["Labels"]["com.amazonaws.sagemaker.capabilities.multi-models"] == "true"
    # what it was built from: the version, this checkout's commit (the one its serve logs first), the licence
    origin = subprocess.run(
        ["git", "-C", str(paths.REPO), "remote", "get-url", "origin"], capture_output=True, text=True
    )
    oci = {name.rsplit(".", 1)[1]: value for name, value in config["Labels"].items() if ".opencontainers." in name}
    assert oci == {
        "title": "sagemaker-tfs",
        "version": build_info.version(),
        "revision": build_info.commit(),
        "source": origin.stdout.strip() if origin.returncode == 0 else "unknown",
        "licenses": "Apache-2.0",
    }
    result = podman(
        "run",
        "--rm",
        *limits(),
        "--entrypoint",
        "sh",
        image,
        "-c",
        "python3 -c 'import platform; print(platform.python_version())'; for name in serve nginx "
        "tfs-model-server tensorflow_model_server; do command -v $name; done; ls -A /opt/sagemaker-tfs; "
        "readlink /var/log/nginx/error.log",
    )
    assert result.stdout.split("\n") == [
        "3.10.13",
        "/opt/sagemaker-tfs/.venv/bin/serve",
        "/usr/sbin/nginx",
        ".venv",  # nothing else
        "/dev/stderr",
        "",
    ]  # where an nginx without -e (before 1.19.5) logs before it reads its config


@pytest.fixture(scope="module")
def model_server_mounts(tmp_path_factory) -> list[str]:
    """The stand-in tensorflow_model_server at the real one's path, and what it runs, read-only at their paths."""
    wrapper = tmp_path_factory.mktemp("tfs-bin") / "tensorflow_model_server"
    container = Path(sagemaker_tfs.__file__).resolve().parent.parent
    wrapper.write_text(
        f"#!/bin/sh\nPYTHONPATH='{container}' exec '{sys.executable}' -m sagemaker_tfs.model_server \"$@\"\n"
    )
    wrapper.chmod(0o755)
    mounts = [f"{wrapper}:/usr/bin/tensorflow_model_server"]
    mounts += [f"{path}:{path}" for path in (Path(sys.prefix), container, Path(sys.base_prefix))]
    return [option for mount in mounts for option in ("-v", f"{mount}:ro")]


def readable(folder: Path) -> Path:
    """folder and everything in it readable by any user (the --user 1000 runs)."""
    for root, _dirs, files in os.walk(folder):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return folder


class Container:
    def __init__(self, image: str, options: list[str], mounts: list[str], env: dict[str, str] | None = None):
        self.port = ports.free_port()
        self.name = f"sagemaker-tfs-test-{self.port}-{os.getpid()}"
        settings = [option for key, value in (env or {}).items() for option in ("-e", f"{key}={value}")]
        podman(
            "run",
            "-d",
            "--name",
            self.name,
            *limits(),
            "-p",
            f"127.0.0.1:{self.port}:8080",
            *options,
            *mounts,
            *settings,
            image,
            "serve",
        )

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def wait_ready(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while clients.http_status(f"http://127.0.0.1:{self.port}/ping") != 200:
            running = podman("inspect", self.name, "--format", "{{.State.Running}}").stdout.strip()
            assert running == "true" and time.monotonic() < deadline, f"not ready:\n{self.logs()}"
            time.sleep(0.5)

    def call(self, method: str, path: str, body: str | None = None, **headers: str) -> clients.Answer:
        return clients.http_call(self.port, method, path, body, headers)

    def nginx_users(self) -> dict[str, set[str]]:
        """The users of nginx's master and of its workers, as `ps` in the container names them."""
        users: dict[str, set[str]] = {"master": set(), "worker": set()}
        for line in podman("top", self.name, "user", "args").stdout.splitlines():
            user, _, args = line.partition(" ")
            if args.strip().startswith("nginx: "):
                users["master" if "master process" in args else "worker"].add(user)
        return users

    def stop(self) -> int:
        """SIGTERM (podman stop), as SageMaker stops a container; the exit status."""
        podman("stop", "--time", "60", self.name, timeout=120)
        return int(podman("inspect", self.name, "--format", "{{.State.ExitCode}}").stdout)

    def remove(self) -> None:
        podman("rm", "--force", self.name, check=False)


SCENARIOS = {
    "root": [],
    "read-only": ["--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp"],  # docker run --read-only --tmpfs
    "user-1000": ["--user", "1000"],
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_image_serves_as_sagemaker_runs_it(image, model_server_mounts, tmp_path, scenario):
    options = SCENARIOS[scenario]
    single = readable(model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path, "model"))
    models = readable(tmp_path / "models")
    model_dirs.copy_model(paths.HALF_PLUS_THREE, models, "half")
    code = readable(image_support.write_code_with_requirements(tmp_path / "multi") / "code")
    containers = []
    try:
        plain = Container(image, options, model_server_mounts + ["-v", f"{single}:/opt/ml/model:ro"])
        containers.append(plain)
        multi = Container(
            image,
            options,
            model_server_mounts + ["-v", f"{models}:/opt/ml/models:ro", "-v", f"{code}:/opt/ml/code:ro"],
            {"SAGEMAKER_MULTI_MODEL": "true"},
        )
        containers.append(multi)
        plain.wait_ready()
        multi.wait_ready()

        answer = plain.call("POST", "/invocations", JSON_BODY, **{"Content-Type": "application/json"})
        assert (answer.status, answer.content_type, answer.text) == (200, "application/json", PRETTY_PREDICTIONS)
        answer = plain.call("POST", "/invocations", "1\n2\n", **{"Content-Type": "text/csv", "Accept": "text/csv"})
        assert (answer.status, answer.content_type, answer.text) == (200, "text/csv", "3.5\n4.0")

        answer = multi.call("POST", "/models", json.dumps({"model_name": "half", "url": "/opt/ml/models/half"}))
        assert answer.status == 200, answer.text
        assert answer.json()["success"].startswith("Successfully loaded model half")
        answer = multi.call("POST", "/models/half/invoke", JSON_BODY, **{"Content-Type": "application/json"})
        # the handler imports the package of code/requirements.txt: into the image's environment when root may
        # write it, else into the runtime folder (a read-only image, a user who may not write the environment)
        uid = 1000 if scenario == "user-1000" else 0
        where = (
            "/opt/sagemaker-tfs/.venv/lib/python3.10/site-packages"
            if scenario == "root"
            else f"/tmp/sagemaker-tfs-{uid}-8080/python-packages"
        )
        assert (answer.status, answer.json()) == (
            200,
            {
                "predictions": [3.5, 4.0, 5.5],
                "extra": "extra 1.0",
                "extra_file": f"{where}/{image_support.PACKAGE}/__init__.py",
            },
        )

        # nginx's workers never run as root; under --user 1000 nothing does
        user = "1000" if scenario == "user-1000" else "root"
        assert plain.nginx_users() == {"master": {user}, "worker": {"1000" if user == "1000" else "nobody"}}

        for container in containers:
            assert container.stop() == 0, container.logs()
            assert container.logs().rstrip().endswith("INFO serve: stopped")
    finally:
        for container in containers:
            container.remove()


def test_a_read_only_root_without_a_writable_tmp_stops_with_one_message(image, model_server_mounts, tmp_path):
    model = readable(model_dirs.copy_model(paths.HALF_PLUS_THREE, tmp_path, "model"))
    result = podman(
        "run",
        "--rm",
        *limits(),
        "--read-only",
        "--read-only-tmpfs=false",
        *model_server_mounts,
        "-v",
        f"{model}:/opt/ml/model:ro",
        image,
        "serve",
        timeout=120,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line.split(" ERROR serve: ", 1)[1] for line in result.stderr.splitlines() if " ERROR serve: " in line]
    assert errors == [f"cannot start: {READ_ONLY_MESSAGE}"]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.13"])  # 3.10: the image itself
def test_the_wheelhouse_installs_offline_on_every_supported_python(image, tmp_path, version):
    # the wheelhouse scripts/build-image.sh made for the image, installed as the Dockerfile does (--no-index; no
    # pip configuration of this machine), then the modules serve and the workers import
    python = sorted(Path("/root/.pyenv/versions").glob(f"{version}.*/bin/python3"))[-1]
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", venv], check=True, timeout=120)
    env = {
        **os.environ,
        "INSTALL_PROFILE": "image",
        "INSTALL_VENV": str(venv),
        "PIP_CONFIG_FILE": os.devnull,
        "INSTALL_WHEELHOUSE": str(BUILD / "wheelhouse"),
    }
    result = subprocess.run(
        [paths.REPO / "scripts" / "install.sh"], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    check = "import sys, sagemaker_tfs.serve, sagemaker_tfs.app.routes; print(sys.version_info[:2])"
    result = subprocess.run(
        [venv / "bin" / "python", "-c", check], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert (result.returncode, result.stdout) == (0, f"({version.replace('.', ', ')})\n"), result.stderr


# The nginx the tensorflow/serving 2.20 bases install (Ubuntu 22.04's apt): 1.18, with PCRE 8, as Debian 11 has it;
# the Debian 12 stand-in base has 1.22 and PCRE2.
OLD_NGINX_BASE = ["mmdebstrap", "--quiet", "--format=tar", "--variant=minbase", "--include=nginx", "bullseye"]
# Stand-ins of the model server and of gunicorn, each answering who it is (only this test uses them).
WHO_ANSWERS = """daemon off;
pid {runtime}/who.pid;
error_log stderr;
events {{}}
http {{
    client_max_body_size 0;
    client_body_temp_path {runtime}/who;
    server {{
        listen 127.0.0.1:9001;
        location / {{ default_type application/json; return 200 '{{"route": "model server", "path": "$uri"}}'; }}
    }}
    server {{
        listen unix:{runtime}/gunicorn.sock;
        location / {{ default_type application/json; return 200 '{{"route": "app", "path": "$uri"}}'; }}
    }}
}}
"""


def test_the_nginx_of_the_real_bases_takes_serves_command_and_config(tmp_path):
    """nginx 1.18 starts with the command and config serve gives it (no -e before 1.19.5), and its direct route
    chooses by the body with PCRE 8 as it does with PCRE2: the model server for one TFS object, the app for the rest."""
    from sagemaker_tfs.config import Settings
    from sagemaker_tfs.stack import nginx

    base = imported("nginx118", OLD_NGINX_BASE)
    version = nginx.version(podman("run", "--rm", *limits(), base, "nginx", "-v").stderr)
    assert version[:2] == (1, 18)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    settings = Settings.from_env({"SAGEMAKER_RUNTIME_DIR": str(runtime), "SAGEMAKER_SAFE_PORT_RANGE": "9000-9001"})
    settings = settings.resolved(str(runtime), "half_plus_three")  # direct_route_cases' default model
    config = nginx.write_config(settings, nginx.direct_model(settings, None), version)
    (runtime / "who.conf").write_text(WHO_ANSWERS.format(runtime=runtime))
    (runtime / "who").mkdir()
    port = ports.free_port()
    start = f"nginx -c {runtime}/who.conf & exec {' '.join(nginx.command(config, version))}"
    name = f"sagemaker-tfs-test-nginx-{port}"
    podman(
        "run",
        "-d",
        "--name",
        name,
        *limits(),
        "-p",
        f"127.0.0.1:{port}:8080",
        "-v",
        f"{tmp_path}:{tmp_path}",
        base,
        "sh",
        "-c",
        start,
    )
    try:
        deadline = time.monotonic() + 30
        while clients.http_status(f"http://127.0.0.1:{port}/ping") is None:
            assert time.monotonic() < deadline, podman("logs", name).stderr
            time.sleep(0.2)
        json_type = {"Content-Type": "application/json"}
        large = '{"instances": [' + ", ".join(["1.0"] * 400_000) + "]}"  # 2 MB: beyond nginx's usual 1 MB buffer
        cases = [
            *((body, json_type, route) for body, route in BODIES),
            (large, json_type, MODEL_SERVER),
            (JSON_BODY, {"Content-Type": "text/csv"}, APP),
            *((JSON_BODY, {**json_type, ATTRIBUTES: attributes}, route) for attributes, route in ATTRIBUTE_FORMS),
        ]
        for body, headers, route in cases:
            answer = clients.http_call(port, "POST", "/invocations", body, headers).json()
            named = route not in (APP, MODEL_SERVER)  # an attribute row: the model server path the route calls
            seen = answer["path"] if named and answer["route"] == MODEL_SERVER else answer["route"]
            assert seen == route, (body[:80], headers)
        # nginx 1.18 sees a repeated header's first line: the route reads it, and the app gets that line alone
        for first, second in (("application/json", "text/csv"), ("text/csv", "application/json")):
            lines = [("Content-Type", first), ("Content-Type", second)]
            answer = clients.http_call(port, "POST", "/invocations", JSON_BODY, lines).json()
            assert answer["route"] == (MODEL_SERVER if first == "application/json" else APP)
        assert "[emerg]" not in podman("logs", name).stderr
    finally:
        podman("rm", "--force", name, check=False)
    # the other configs serve writes: metrics and Server-Timing on the direct route, multi-model endpoints
    variants = ({"SAGEMAKER_METRICS": "true", "SAGEMAKER_SERVER_TIMING": "true"}, {"SAGEMAKER_MULTI_MODEL": "true"})
    for number, env in enumerate(variants):
        folder = tmp_path / str(number)  # short: a unix socket's path has at most 107 bytes
        folder.mkdir()
        other = Settings.from_env({"SAGEMAKER_RUNTIME_DIR": str(folder), **env})
        other = other.resolved(str(folder), None if other.multi_model else "m")
        config = nginx.write_config(other, nginx.direct_model(other, None), version)
        check = podman(
            "run",
            "--rm",
            *limits(),
            "-v",
            f"{tmp_path}:{tmp_path}",
            base,
            "nginx",
            "-t",
            "-c",
            str(config),
            check=False,
        )
        assert check.returncode == 0, check.stderr
