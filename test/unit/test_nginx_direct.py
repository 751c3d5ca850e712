"""When nginx.conf has the direct route (nginx -> model servers for plain TFS JSON), and that nginx accepts it."""

from __future__ import annotations

import re
import subprocess
import uuid
from pathlib import Path

import pytest
from sagemaker_tfs.config import Settings
from sagemaker_tfs.stack import nginx


def _settings(tmp_path: Path, **env: str) -> Settings:
    base = {
        "SAGEMAKER_RUNTIME_DIR": str(tmp_path),
        "SAGEMAKER_SAFE_PORT_RANGE": "20000-20003",
        "SAGEMAKER_TFS_INSTANCE_COUNT": "2",
    }
    settings = Settings.from_env({**base, **env})
    return settings.resolved(str(tmp_path), None if settings.multi_model else "half_plus_three")


def test_the_route_calls_the_default_model_on_every_instance(tmp_path):
    settings = _settings(tmp_path)
    model = nginx.direct_model(settings, None)
    assert model == "half_plus_three"
    config = nginx.render(settings, model, nginx.version())
    assert "server 127.0.0.1:20001;\n        server 127.0.0.1:20003;\n        keepalive 64;" in config
    assert (
        "rewrite ^ /v1/models/$sagemaker_direct_model$sagemaker_direct_version:$sagemaker_direct_method break;\n"
        "            proxy_pass http://model_servers;"
    ) in config
    # only a body the rule refuses, a 400 (the app may word it otherwise) and nginx's own 502 and 504 go to the app
    assert "error_page 405 = @model_server;" in config
    assert config.count("proxy_intercept_errors on;") == 1
    assert "            error_page 418 400 502 504 = @app;\n" in config
    assert (
        'map $http_x_amzn_sagemaker_custom_attributes $sagemaker_direct_model {\n        default "half_plus_three";'
    ) in config
    assert "error_page 418 = @direct;" in config


def _made_id(config: str, key: str) -> str:
    """The id the config's request id map makes for its key ("<pid>:<connection>:<request>", as nginx pads them),
    its regex read as Python reads it (PCRE's syntax here, but for Python's `?P<name>`)."""
    found = re.findall(r'map "([^"]+)" \$sagemaker_new_request_id \{\n\s+"~([^"]+)" "([^"]+)";', config)
    [(source, pattern, value)] = found
    assert source == "0000000$pid:0000000$connection:0000$connection_requests"
    pid, connection, request = key.split(":")
    match = re.fullmatch(pattern.replace("(?<", "(?P<"), f"0000000{pid}:0000000{connection}:0000{request}")
    assert match is not None, key
    return re.sub(r"\$(\w+)", lambda name: match[name[1]], value)


def test_the_ids_nginx_makes_are_version_4_uuids_unique_in_a_run_and_drawn_anew_at_each_start(tmp_path):
    settings = _settings(tmp_path)
    config, again = (nginx.render(settings, "half_plus_three", nginx.version()) for _ in range(2))
    keys = ("1:1:1", "4194304:1:1", "4194304:2:1", "4194304:1:2", "77:9999999:1000", "77:12345678:98765")
    made = [_made_id(config, key) for key in keys]
    assert len(set(made)) == len(made)
    for rid in made:
        parsed = uuid.UUID(rid)
        assert (str(parsed), parsed.version, parsed.variant) == (rid, 4, uuid.RFC_4122)
    # the pid's 7 digits, the connection's 7 and the request's 4 (the last digits of larger numbers) end the id
    assert (made[1][14:19], made[1][20:]) == ("4419-", "430-400000010001")  # (20: after the variant's digit)
    assert made[5][23:] == "-723456788765"
    # 48 bits drawn at each start head the ids
    assert made[0][:13] != _made_id(again, "1:1:1")[:13]


def test_invoke_endpoint_hands_every_model_server_error_to_the_app(tmp_path):
    """The local runtime API's InvokeEndpoint takes the route through a location of its own: the app answers every
    error of the container as the operation's ModelError."""
    config = nginx.render(_settings(tmp_path, SAGEMAKER_LOCAL_RUNTIME_API="true"), "half_plus_three", nginx.version())
    assert "error_page 405 = $sagemaker_model_server;" in config
    assert (
        '    map $sagemaker_runtime_variant $sagemaker_model_server {\n        "" @model_server;\n'
        "        default @operation_model_server;\n    }\n"
    ) in config
    assert "            error_page 418 400 502 504 = @app;\n" in config
    assert "            error_page 418 400 401 403 404 409 413 429 500 501 502 503 504 = @app;\n" in config


def test_batch_transform_takes_the_route(tmp_path):
    """Its MultiRecord batches (JSON lines) go to the app by their body, its single records to the model server."""
    assert nginx.direct_model(_settings(tmp_path, SAGEMAKER_BATCH="true"), None) == "half_plus_three"


@pytest.mark.parametrize(
    "env, script",
    [
        ({"SAGEMAKER_NGINX_DIRECT_INVOCATIONS": "false"}, None),
        ({}, Path("code/inference.py")),
        ({"SAGEMAKER_MULTI_MODEL": "true"}, None),
    ],
)
def test_no_route_when_the_app_must_answer(tmp_path, env, script):
    settings = _settings(tmp_path, **env)
    assert nginx.direct_model(settings, script) is None
    config = nginx.render(settings, None, nginx.version())
    assert "@direct" not in config and "model_servers" not in config


@pytest.mark.parametrize("on", ["true", "false"])
def test_nginx_accepts_the_config(tmp_path, on):
    settings = _settings(tmp_path, SAGEMAKER_SERVER_TIMING=on, SAGEMAKER_METRICS=on, SAGEMAKER_LOCAL_RUNTIME_API=on)
    for folder in ("nginx", *(f"nginx/{name}" for name in nginx.TEMP_FOLDERS)):
        (tmp_path / folder).mkdir(exist_ok=True)
    (tmp_path / "nginx.conf").write_text(nginx.render(settings, "half_plus_three", nginx.version()))
    check = subprocess.run(
        ["nginx", "-t", "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    assert "[warn]" not in check.stderr  # (nginx warned of its variables_hash at every start)


def test_the_direct_route_log_counts_nginx_lines(tmp_path):
    """nginx's syslog lines (`<status> <request time>`) become the direct route's histogram."""
    from sagemaker_tfs.stack.direct_metrics import DirectRouteLog

    counter = DirectRouteLog(tmp_path / "direct.sock")
    try:
        for line in (
            "<190>Nov 26 23:00:00 direct: 200 0.002",
            "<190>Nov 26 23:00:01 direct: 200 0.300",
            "<190>Nov 26 23:00:02 direct: 404 0.001",
            "garbage",
        ):
            counter.count(line)
        (family,) = counter.collect()
        samples = {(s.name, s.labels.get("status"), s.labels.get("le")): s.value for s in family.samples}
    finally:
        counter.close()
    assert samples[("sagemaker_tfs_direct_request_duration_seconds_count", "200", None)] == 2
    assert samples[("sagemaker_tfs_direct_request_duration_seconds_bucket", "200", "0.0025")] == 1
    assert samples[("sagemaker_tfs_direct_request_duration_seconds_count", "404", None)] == 1
    assert samples[("sagemaker_tfs_direct_request_duration_seconds_sum", "200", None)] == pytest.approx(0.302)
