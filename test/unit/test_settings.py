"""The settings (config.py): SAGEMAKER_* variables read with their defaults, parsing and errors that name the
variable; the hand-over from `serve` to its children (to_env/from_env), the variables `serve` sets, the
/execution-parameters rule, and docs/settings.md's table generated from the declarations."""

import os
import subprocess
import sys

import paths
import pytest
from sagemaker_tfs.config import VARIABLES, ConfigError, Settings
from sagemaker_tfs.shared.cpus import cpu_count

SOME_SETTINGS = {
    "SAGEMAKER_BIND_TO_PORT": "9090",
    "SAGEMAKER_SAFE_PORT_RANGE": "10000-10005",
    "SAGEMAKER_TFS_INSTANCE_COUNT": "3",
    "SAGEMAKER_TFS_ENABLE_BATCHING": "TRUE",
    "SAGEMAKER_GUNICORN_THREADS": "4",
    "SAGEMAKER_BATCH": "",
    "SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "120",
    "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN": "0.35",
    "SAGEMAKER_BATCH_STRATEGY": "SingleRecord",
    "SAGEMAKER_MAX_PAYLOAD_IN_MB": "0",
    "OMP_NUM_THREADS": "4",
}


@pytest.mark.parametrize("env", [{}, SOME_SETTINGS], ids=["defaults", "some set"])
def test_a_child_reads_back_exactly_the_settings_serve_resolved(env):
    resolved = Settings.from_env(env).resolved("/models/m", "m")
    child_env = resolved.to_env({"PATH": "/bin"})
    assert Settings.from_env(child_env) == resolved
    assert child_env["PATH"] == "/bin"
    # computed defaults are handed over as computed, not computed again by each child
    assert child_env["SAGEMAKER_GUNICORN_WORKERS"] == str(resolved.gunicorn_workers)
    assert child_env["SAGEMAKER_RUNTIME_DIR"] == resolved.runtime_dir


def test_serve_hands_over_what_it_found_and_the_model_servers_ports():
    resolved = Settings.from_env(SOME_SETTINGS).resolved("/models", "b")
    env = resolved.to_env({})
    assert (env["SAGEMAKER_MODEL_DIR"], env["TFS_DEFAULT_MODEL_NAME"]) == ("/models", "b")
    assert (env["TFS_GRPC_PORTS"], env["TFS_REST_PORTS"]) == ("10000,10002,10004", "10001,10003,10005")
    assert (env["SAGEMAKER_BATCH"], env["SAGEMAKER_BATCH_STRATEGY"], env["SAGEMAKER_MAX_PAYLOAD_IN_MB"]) == (
        "true",
        "SINGLE_RECORD",
        "0",
    )
    assert (env["SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS"], env["OMP_NUM_THREADS"]) == ("120", "4")


def test_to_env_replaces_every_declared_variable_of_the_base():
    stale = {"SAGEMAKER_BATCH": "true", "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "4", "TFS_REST_PORTS": "1", "HOME": "/h"}
    env = Settings.from_env({}).to_env(stale)
    assert env["HOME"] == "/h"
    assert not {"SAGEMAKER_BATCH", "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS", "TFS_REST_PORTS"} & env.keys()
    assert env["OMP_NUM_THREADS"] == "1"  # as the original container, when unset


def test_env_of_sets_only_the_given_settings():
    assert Settings.env_of(
        model_dir="/m",
        bind_port=8081,
        safe_port_range=(9000, 9001),
        batch=True,
        batch_strategy=None,
        model_server_rest_ports=(1, 2),
    ) == {
        "SAGEMAKER_MODEL_DIR": "/m",
        "SAGEMAKER_BIND_TO_PORT": "8081",
        "SAGEMAKER_SAFE_PORT_RANGE": "9000-9001",
        "SAGEMAKER_BATCH": "true",
        "TFS_REST_PORTS": "1,2",
    }
    with pytest.raises(KeyError):
        Settings.env_of(no_such_setting=1)


def test_the_variables_serve_sets_are_checked_by_the_app():
    with pytest.raises(
        ConfigError,
        match=r"^TFS_REST_PORTS, TFS_GRPC_PORTS, TFS_DEFAULT_MODEL_NAME not set: "
        r"the app is started by `serve`, which sets them$",
    ):
        Settings.from_env({}).require_set_by_serve()
    Settings.from_env({}).resolved("/m", "m").require_set_by_serve()


@pytest.mark.parametrize(
    "env, message",
    [
        ({"TFS_REST_PORTS": "x"}, "TFS_REST_PORTS='x' is not valid: must be a comma-separated list of ports"),
        (
            {"TFS_GRPC_PORTS": "1,70000"},
            "TFS_GRPC_PORTS='1,70000' is not valid: must be a comma-separated list of ports",
        ),
        (
            {"TFS_REST_PORTS": "1,2", "TFS_GRPC_PORTS": "3"},
            "TFS_REST_PORTS='1,2' and TFS_GRPC_PORTS='3' must list as many ports",
        ),
        (
            {"SAGEMAKER_MAX_PAYLOAD_IN_MB": "101"},
            "SAGEMAKER_MAX_PAYLOAD_IN_MB='101' is not valid: must be between 0 and 100",
        ),
        (
            {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "0"},
            "SAGEMAKER_MAX_CONCURRENT_TRANSFORMS='0' is not valid: must be at least 1",
        ),
    ],
)
def test_invalid_values_name_the_variable(env, message):
    with pytest.raises(ConfigError) as err:
        Settings.from_env(env)
    assert str(err.value) == message


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, {}),
        ({"SAGEMAKER_BATCH": "true"}, {}),
        ({"SAGEMAKER_BATCH_STRATEGY": "multi_record"}, {"BatchStrategy": "MULTI_RECORD"}),
        (
            {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "4", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "25"},
            {"MaxConcurrentTransforms": 4, "MaxPayloadInMB": 25},
        ),
        # over SageMaker's 100 MB in flight: the concurrency is lowered (6 MB when the payload is not given)
        (
            {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "8", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "20"},
            {"MaxConcurrentTransforms": 5, "MaxPayloadInMB": 20},
        ),
        ({"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "50"}, {"MaxConcurrentTransforms": 16}),
        (
            {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "3", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "100"},
            {"MaxConcurrentTransforms": 1, "MaxPayloadInMB": 100},
        ),
        # 0 MB: no limit (chunked requests), so nothing to lower
        (
            {"SAGEMAKER_MAX_CONCURRENT_TRANSFORMS": "50", "SAGEMAKER_MAX_PAYLOAD_IN_MB": "0"},
            {"MaxConcurrentTransforms": 50, "MaxPayloadInMB": 0},
        ),
    ],
)
def test_execution_parameters_report_only_what_is_set_within_sagemakers_limit(env, expected):
    assert Settings.from_env(env).execution_parameters() == expected


def test_every_variable_has_help_and_one_declaration():
    names = [variable.name for variable in VARIABLES.values()]
    assert len(names) == len(set(names))
    assert all(variable.help and "|" not in variable.help for variable in VARIABLES.values())


def test_the_settings_page_table_is_generated_from_the_declarations():
    result = subprocess.run(
        [sys.executable, str(paths.REPO / "scripts" / "settings_table.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_defaults_match_the_original_container():
    s = Settings.from_env({})
    assert s.bind_port == 8080
    assert s.model_dir == "/opt/ml/model"
    assert s.runtime_dir == f"{os.environ['XDG_RUNTIME_DIR']}/sagemaker-tfs-8080"  # the suite's own (conftest)
    assert s.tfs_instance_count == 1
    assert s.ports() == [(9000, 8501)]
    assert s.tfs_default_model_name is None
    assert s.tfs_enable_batching is False
    assert (s.tfs_max_batch_size, s.tfs_batch_timeout_micros) == (8, 1000)
    assert s.tfs_num_batch_threads == cpu_count()
    assert s.tfs_max_enqueued_batches == cpu_count()
    assert s.gunicorn_timeout_seconds == 30
    assert s.nginx_proxy_read_timeout_seconds == 60
    assert s.nginx_loglevel == "error"
    assert s.gunicorn_loglevel == "info"
    assert s.tfs_fractional_gpu_mem_margin == 0.2
    assert s.tfs_wait_time_seconds == 300
    assert s.nginx_client_max_body_size == "0"


def test_gunicorn_defaults_come_from_the_core_count():
    s = Settings.from_env({})
    assert s.gunicorn_workers == cpu_count()
    assert (s.gunicorn_threads, s.gunicorn_worker_class) == (1, "loop")
    threaded = Settings.from_env({"SAGEMAKER_GUNICORN_THREADS": "4"})  # for gthread, when chosen
    assert (threaded.gunicorn_threads, threaded.gunicorn_worker_class) == (4, "loop")
    explicit = Settings.from_env({"SAGEMAKER_GUNICORN_WORKERS": "3", "SAGEMAKER_GUNICORN_WORKER_CLASS": "GThread"})
    assert (explicit.gunicorn_workers, explicit.gunicorn_worker_class) == (3, "gthread")


def test_batch_transform_raises_the_queue_default():
    assert Settings.from_env({"SAGEMAKER_BATCH": "true"}).tfs_max_enqueued_batches == 100000000
    assert (
        Settings.from_env(
            {"SAGEMAKER_BATCH": "true", "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "7"}
        ).tfs_max_enqueued_batches
        == 7
    )


def test_batching_flag_is_case_insensitive():
    assert Settings.from_env({"SAGEMAKER_TFS_ENABLE_BATCHING": "TRUE"}).tfs_enable_batching is True
    assert Settings.from_env({"SAGEMAKER_TFS_ENABLE_BATCHING": "false"}).tfs_enable_batching is False


def test_default_model_name_none_string_means_unset():
    assert Settings.from_env({"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "None"}).tfs_default_model_name is None
    assert Settings.from_env({"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "m"}).tfs_default_model_name == "m"


def test_proxy_read_timeout_never_below_gunicorn_timeout():
    s = Settings.from_env(
        {"SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "120", "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "60"}
    )
    assert s.nginx_proxy_read_timeout_seconds == 120


def test_safe_port_range_gives_two_ports_per_instance():
    s = Settings.from_env({"SAGEMAKER_SAFE_PORT_RANGE": "10000-10005", "SAGEMAKER_TFS_INSTANCE_COUNT": "3"})
    assert s.ports() == [(10000, 10001), (10002, 10003), (10004, 10005)]


def test_runtime_dir_follows_the_bind_port():
    assert (
        Settings.from_env({"SAGEMAKER_BIND_TO_PORT": "9090"}).runtime_dir
        == f"{os.environ['XDG_RUNTIME_DIR']}/sagemaker-tfs-9090"
    )
    assert Settings.from_env({"SAGEMAKER_RUNTIME_DIR": "/x"}).runtime_dir == "/x"


@pytest.mark.parametrize(
    "name, value, message",
    [
        (
            "SAGEMAKER_TFS_ENABLE_BATCHING",
            "yes",
            "SAGEMAKER_TFS_ENABLE_BATCHING='yes' is not valid: must be 'true' or 'false'",
        ),
        ("SAGEMAKER_MULTI_MODEL", "1", "SAGEMAKER_MULTI_MODEL='1' is not valid: must be 'true' or 'false'"),
        ("SAGEMAKER_BIND_TO_PORT", "http", "SAGEMAKER_BIND_TO_PORT='http' is not valid: must be an integer"),
        ("SAGEMAKER_GUNICORN_WORKERS", "0", "SAGEMAKER_GUNICORN_WORKERS='0' is not valid: must be at least 1"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "9000", "SAGEMAKER_SAFE_PORT_RANGE='9000' is not valid: must be 'low-high'"),
        (
            "SAGEMAKER_GUNICORN_WORKER_CLASS",
            "uvicorn",
            "SAGEMAKER_GUNICORN_WORKER_CLASS='uvicorn' is not valid: must be one of",
        ),
        ("SAGEMAKER_TFS_NGINX_LOGLEVEL", "loud", "SAGEMAKER_TFS_NGINX_LOGLEVEL='loud' is not valid: must be one of"),
        (
            "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN",
            "1.5",
            "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN='1.5' is not valid",
        ),
        ("SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE", "lots", "SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE='lots' is not valid"),
    ],
)
def test_invalid_value_message_starts_with_the_name(name, value, message):
    with pytest.raises(ConfigError) as err:
        Settings.from_env({name: value})
    assert str(err.value).startswith(message)


def test_port_range_too_small_for_the_instances():
    with pytest.raises(ConfigError, match=r"not enough ports available in SAGEMAKER_SAFE_PORT_RANGE \(9000-9002\)"):
        Settings.from_env({"SAGEMAKER_SAFE_PORT_RANGE": "9000-9002", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"})
