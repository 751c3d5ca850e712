"""Settings from SAGEMAKER_* variables: defaults, parsing, and errors that name the variable."""

import os

import pytest

from sagemaker_tfs.config import ConfigError, Settings
from sagemaker_tfs.shared.cpus import cpu_count


def test_defaults_match_the_original_container():
    s = Settings.from_env({})
    assert s.bind_port == 8080
    assert s.model_dir == "/opt/ml/model"
    assert s.runtime_dir == f"/tmp/sagemaker-tfs-{os.geteuid()}-8080"
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
    assert (s.gunicorn_threads, s.gunicorn_worker_class) == (1, "connections")
    threaded = Settings.from_env({"SAGEMAKER_GUNICORN_THREADS": "4"})  # for gthread, when chosen
    assert (threaded.gunicorn_threads, threaded.gunicorn_worker_class) == (4, "connections")
    explicit = Settings.from_env({"SAGEMAKER_GUNICORN_WORKERS": "3", "SAGEMAKER_GUNICORN_WORKER_CLASS": "GThread"})
    assert (explicit.gunicorn_workers, explicit.gunicorn_worker_class) == (3, "gthread")


def test_batch_transform_raises_the_queue_default():
    assert Settings.from_env({"SAGEMAKER_BATCH": "true"}).tfs_max_enqueued_batches == 100000000
    assert Settings.from_env({"SAGEMAKER_BATCH": "true", "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "7"}) \
        .tfs_max_enqueued_batches == 7


def test_batching_flag_is_case_insensitive():
    assert Settings.from_env({"SAGEMAKER_TFS_ENABLE_BATCHING": "TRUE"}).tfs_enable_batching is True
    assert Settings.from_env({"SAGEMAKER_TFS_ENABLE_BATCHING": "false"}).tfs_enable_batching is False


def test_default_model_name_none_string_means_unset():
    assert Settings.from_env({"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "None"}).tfs_default_model_name is None
    assert Settings.from_env({"SAGEMAKER_TFS_DEFAULT_MODEL_NAME": "m"}).tfs_default_model_name == "m"


def test_proxy_read_timeout_never_below_gunicorn_timeout():
    s = Settings.from_env({"SAGEMAKER_GUNICORN_TIMEOUT_SECONDS": "120",
                           "SAGEMAKER_NGINX_PROXY_READ_TIMEOUT_SECONDS": "60"})
    assert s.nginx_proxy_read_timeout_seconds == 120


def test_safe_port_range_gives_two_ports_per_instance():
    s = Settings.from_env({"SAGEMAKER_SAFE_PORT_RANGE": "10000-10005", "SAGEMAKER_TFS_INSTANCE_COUNT": "3"})
    assert s.ports() == [(10000, 10001), (10002, 10003), (10004, 10005)]


def test_runtime_dir_follows_the_bind_port():
    assert Settings.from_env({"SAGEMAKER_BIND_TO_PORT": "9090"}).runtime_dir == \
        f"/tmp/sagemaker-tfs-{os.geteuid()}-9090"
    assert Settings.from_env({"SAGEMAKER_RUNTIME_DIR": "/x"}).runtime_dir == "/x"


@pytest.mark.parametrize("name, value, message", [
    ("SAGEMAKER_TFS_ENABLE_BATCHING", "yes", "SAGEMAKER_TFS_ENABLE_BATCHING='yes' is not valid: must be 'true' or 'false'"),
    ("SAGEMAKER_MULTI_MODEL", "1", "SAGEMAKER_MULTI_MODEL='1' is not valid: must be 'true' or 'false'"),
    ("SAGEMAKER_BIND_TO_PORT", "http", "SAGEMAKER_BIND_TO_PORT='http' is not valid: must be an integer"),
    ("SAGEMAKER_GUNICORN_WORKERS", "0", "SAGEMAKER_GUNICORN_WORKERS='0' is not valid: must be at least 1"),
    ("SAGEMAKER_SAFE_PORT_RANGE", "9000", "SAGEMAKER_SAFE_PORT_RANGE='9000' is not valid: must be 'low-high'"),
    ("SAGEMAKER_GUNICORN_WORKER_CLASS", "uvicorn", "SAGEMAKER_GUNICORN_WORKER_CLASS='uvicorn' is not valid: must be one of"),
    ("SAGEMAKER_TFS_NGINX_LOGLEVEL", "loud", "SAGEMAKER_TFS_NGINX_LOGLEVEL='loud' is not valid: must be one of"),
    ("SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN", "1.5", "SAGEMAKER_TFS_FRACTIONAL_GPU_MEM_MARGIN='1.5' is not valid"),
    ("SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE", "lots", "SAGEMAKER_NGINX_CLIENT_MAX_BODY_SIZE='lots' is not valid"),
])
def test_invalid_values_name_the_variable(name, value, message):
    with pytest.raises(ConfigError) as err:
        Settings.from_env({name: value})
    assert str(err.value).startswith(message)


def test_port_range_too_small_for_the_instances():
    with pytest.raises(ConfigError, match=r"not enough ports available in SAGEMAKER_SAFE_PORT_RANGE \(9000-9002\)"):
        Settings.from_env({"SAGEMAKER_SAFE_PORT_RANGE": "9000-9002", "SAGEMAKER_TFS_INSTANCE_COUNT": "2"})
