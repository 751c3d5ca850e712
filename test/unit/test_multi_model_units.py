"""Multi-model pieces that need no stack: the settings, the memory in use (host and cgroup, from fake /proc and
/sys/fs/cgroup trees), the 507 texts, model names, and serve refusing a missing model root."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sagemaker_tfs.config import ConfigError, Settings
from sagemaker_tfs.registry import limits
from sagemaker_tfs.shared.model_names import name_problem


def test_settings_of_a_multi_model_endpoint():
    settings = Settings.from_env({"SAGEMAKER_MULTI_MODEL": "TRUE"})
    assert (
        settings.model_dir,
        settings.multi_model_code_dir,
        settings.multi_model_max_models,
        settings.multi_model_memory_limit_percent,
    ) == ("/opt/ml/models", "/opt/ml/code", 0, 90)
    assert Settings.from_env({}).model_dir == "/opt/ml/model"


@pytest.mark.parametrize(
    "env, message",
    [
        ({"SAGEMAKER_MULTI_MODEL": "yes"}, "SAGEMAKER_MULTI_MODEL='yes' is not valid: must be 'true' or 'false'"),
        (
            {"SAGEMAKER_MULTI_MODEL_MAX_MODELS": "-1"},
            "SAGEMAKER_MULTI_MODEL_MAX_MODELS='-1' is not valid: must be at least 0",
        ),
        (
            {"SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT": "0"},
            "SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT='0' is not valid: must be between 1 and 100",
        ),
        (
            {"SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT": "101"},
            "SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT='101' is not valid: must be between 1 and 100",
        ),
        (
            {
                "SAGEMAKER_MULTI_MODEL": "true",
                "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET": "b",
                "SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX": "p",
            },
            "SAGEMAKER_MULTI_MODEL_UNIVERSAL_BUCKET and SAGEMAKER_MULTI_MODEL_UNIVERSAL_PREFIX are not supported "
            "(scripts "
            "are not downloaded from S3): put the universal code in the folder SAGEMAKER_MULTI_MODEL_CODE_DIR names "
            "(default /opt/ml/code)",
        ),
    ],
)
def test_invalid_multi_model_settings_name_the_variable(env, message):
    with pytest.raises(ConfigError) as info:
        Settings.from_env(env)
    assert str(info.value) == message


def fake_system(tmp_path, meminfo_kb: tuple[int, int], cgroup_line: str, files: dict[str, str]):
    proc, cgroup = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    total, available = meminfo_kb
    (proc / "meminfo").write_text(f"MemTotal: {total} kB\nMemFree: 1 kB\nMemAvailable: {available} kB\n")
    (proc / "self" / "cgroup").write_text(cgroup_line + "\n")
    for path, text in files.items():
        (cgroup / path).parent.mkdir(parents=True, exist_ok=True)
        (cgroup / path).write_text(text)
    return proc, cgroup


@pytest.mark.parametrize(
    "cgroup_line, files, percent",
    [
        ("0::/", {}, 25),  # no cgroup files: the host's
        ("0::/", {"memory.max": "max\n", "memory.current": "900\n"}, 25),  # v2 without a limit
        ("0::/", {"memory.max": "1000\n", "memory.current": "930\n"}, 93),  # v2 limit, at the namespace root
        ("0::/pod/c1", {"pod/c1/memory.max": "2000\n", "pod/c1/memory.current": "1500\n"}, 75),  # v2, own cgroup
        (
            "4:memory:/docker/x",
            {"memory/docker/x/memory.limit_in_bytes": "1000", "memory/docker/x/memory.usage_in_bytes": "501"},
            50,
        ),  # v1
        (
            "4:memory:/",
            {"memory/memory.limit_in_bytes": "9223372036854771712", "memory/memory.usage_in_bytes": "999999"},
            25,
        ),  # v1's "no limit"
        ("0::/", {"memory.max": "1000\n", "memory.current": "100\n"}, 25),  # the host is fuller than the cgroup
    ],
)
def test_memory_in_use_is_the_fuller_of_host_and_cgroup(tmp_path, cgroup_line, files, percent):
    proc, cgroup = fake_system(tmp_path, (1000, 750), cgroup_line, files)
    assert limits.memory_in_use_percent(proc, cgroup) == percent


def test_the_507_texts_in_the_specs_order():
    never = lambda: pytest.fail("memory is not read when the model count refuses")  # noqa: E731
    assert limits.refusal(2, 2, 90, never) == (
        "Memory exhausted: 2 models are loaded and SAGEMAKER_MULTI_MODEL_MAX_MODELS is 2."
    )
    assert limits.refusal(5, 0, 90, lambda: 93) == (
        "Memory exhausted: 93% of memory is in use and SAGEMAKER_MULTI_MODEL_MEMORY_LIMIT_PERCENT is 90."
    )
    assert limits.refusal(1, 2, 90, lambda: 89) is None


@pytest.mark.parametrize(
    "name, problem",
    [
        ("model-7.tar_gz", None),
        ("A" * 255, None),
        ("9", None),
        ("", "must not be empty"),
        (".hidden", "must start with a letter or digit and hold only letters, digits, '.', '_' and '-'"),
        ("a b", "must start with a letter or digit and hold only letters, digits, '.', '_' and '-'"),
        ("é", "must start with a letter or digit and hold only letters, digits, '.', '_' and '-'"),
        (None, "must be a string, not NoneType"),
    ],
)
def test_model_names(name, problem):
    assert name_problem(name) == problem


def test_serve_refuses_a_missing_model_root(tmp_path):
    env = {
        "SAGEMAKER_MULTI_MODEL": "true",
        "SAGEMAKER_MODEL_DIR": str(tmp_path / "absent"),
        "SAGEMAKER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-m", "sagemaker_tfs.serve"],
        env={**env, "PYTHONPATH": ":".join(sys.path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert (
        f"cannot start: the model root {tmp_path / 'absent'} of the multi-model endpoint does not exist "
        "(SAGEMAKER_MODEL_DIR, default /opt/ml/models)"
    ) in done.stderr
