"""The console scripts, run as installed (pyproject.toml's [project.scripts]): `sagemaker-tfs` and its subcommands,
each with its own help under its own name; the deprecated `transform` and `package-model` aliases, which say so in
one line on stderr and otherwise work as before."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import paths
import pytest
from sagemaker_tfs import cli

DEPRECATED = "{0}: deprecated: use `sagemaker-tfs {0}` (`{0}` is removed in the next release)\n"
UNKNOWN = (
    "usage: sagemaker-tfs [-h] [--version] COMMAND [ARGUMENTS ...]\n"
    "sagemaker-tfs: error: unknown command {!r}: choose from serve, model-server, transform, package-model, "
    "tune (sagemaker-tfs --help)\n"
)


def script(name: str, *args: str | Path, expect: int) -> subprocess.CompletedProcess:
    path = paths.VENV_BIN / name
    assert path.exists(), f"{path} is not installed: run scripts/install.sh (pyproject.toml's scripts changed)"
    result = subprocess.run(
        [path, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": f"{paths.VENV_BIN}:/usr/bin:/bin", "COLUMNS": "120"},
    )
    assert result.returncode == expect, result.stdout + result.stderr
    return result


def test_the_help_lists_each_subcommand_in_one_line():
    result = script("sagemaker-tfs", "--help", expect=0)
    lines = result.stdout.splitlines()
    assert lines[0] == "usage: sagemaker-tfs [-h] [--version] COMMAND [ARGUMENTS ...]"
    commands = lines[lines.index("commands:") + 1 : lines.index("options:") - 1]
    assert commands == [
        "  serve           start the serving stack (model servers, gunicorn, nginx): the image's entrypoint",
        "  model-server    run the embedded model server, a stand-in for tensorflow_model_server",
        "  transform       run a SageMaker Batch Transform job locally",
        "  package-model   build a model.tar.gz in the layout the container serves, or check one",
        "  tune            measure settings on this machine and recommend the fastest (endpoint, transform)",
    ]
    assert lines[-1] == (
        "A command's own help: sagemaker-tfs COMMAND --help. `serve` and `tfs-model-server` are "
        "also commands of their own."
    )
    assert result.stderr == ""
    assert script("sagemaker-tfs", "-h", expect=0).stdout == result.stdout
    # an install from the checkout (editable): the checkout's HEAD, +dirty when its tracked files differ from it
    git = ["git", "-C", str(paths.REPO)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    changed = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    commit = head + ("+dirty" if changed.stdout.strip() else "")
    assert script("sagemaker-tfs", "--version", expect=0).stdout == f"sagemaker-tfs 0.1.0 (commit {commit})\n"


@pytest.mark.parametrize(
    "args, first_line, own_line",
    [
        (
            ["serve"],
            "`serve`: the container's entrypoint. Starts and supervises the model servers, gunicorn and nginx.",
            "Configuration: SAGEMAKER_* environment variables (docs/settings.md lists them).",
        ),
        (
            ["model-server"],
            "usage: sagemaker-tfs model-server --port=8500 --rest_api_port=8501 "
            "(--model_config_file=FILE | --model_name=NAME --model_base_path=DIR) [flags]",
            "Flags:",
        ),
        (
            ["transform"],
            "usage: sagemaker-tfs transform [-h] --model MODEL [--request FILE] ",
            "job parameters (SDK name / API name):",
        ),
        (
            ["package-model"],
            "usage: sagemaker-tfs package-model [-h] {build,check} ...",
            "    check        check a model.tar.gz or a model folder",
        ),
        (
            ["package-model", "build"],
            "usage: sagemaker-tfs package-model build [-h] [--code CODE] [-o OUTPUT] export_dir",
            "  export_dir            folder with numbered version folders (or model folders)",
        ),
    ],
)
def test_each_subcommand_shows_its_own_help_under_its_name(args, first_line, own_line):
    result = script("sagemaker-tfs", *args, "--help", expect=0)
    lines = result.stdout.splitlines()
    assert lines[0].startswith(first_line)  # a usage line that argparse wraps ends where it wraps it
    # (argparse's help column moves by a space between Pythons: 3.13 puts it nearer)
    assert " ".join(own_line.split()) in [" ".join(line.split()) for line in lines]
    assert result.stderr == ""


@pytest.mark.parametrize("args", [["bogus"], ["Transform", "--help"], ["--model", "m"]])
def test_an_unknown_subcommand_exits_2_with_the_choices(args):
    result = script("sagemaker-tfs", *args, expect=2)
    assert (result.stdout, result.stderr) == ("", UNKNOWN.format(args[0]))


def test_no_subcommand_exits_2():
    result = script("sagemaker-tfs", expect=2)
    assert result.stderr == (
        "usage: sagemaker-tfs [-h] [--version] COMMAND [ARGUMENTS ...]\n"
        "sagemaker-tfs: error: a command is required: serve, model-server, transform, "
        "package-model, tune\n"
    )


def test_a_subcommand_gets_the_rest_of_the_arguments_and_names_itself_in_its_messages():
    result = script(
        "sagemaker-tfs",
        "transform",
        "--model",
        "m",
        "--data",
        "in",
        "--output-path",
        "out",
        "--strategy",
        "Single",
        expect=2,
    )
    assert result.stderr.startswith("sagemaker-tfs transform: 1 validation error detected: Value 'Single' at ")
    result = script("sagemaker-tfs", "model-server", "--port=1", "--no_such_flag=1", expect=2)
    assert result.stderr.startswith(
        "sagemaker-tfs model-server: unknown flag: --no_such_flag\nusage: sagemaker-tfs model-server "
    )
    result = script("sagemaker-tfs", "serve", "extra", expect=2)  # serve's own refusal: it takes no arguments
    assert result.stderr == "serve: error: unexpected arguments extra; configure with SAGEMAKER_* variables\n"


def test_the_transform_alias_says_it_is_deprecated_then_works_as_before(tmp_path):
    job = ["--model", "m", "--job-name", "job", "--data", "in", "--output-path", "out", "--split-type", "Line"]
    old = script("transform", *job, "--dry-run", expect=0)
    new = script("sagemaker-tfs", "transform", *job, "--dry-run", expect=0)
    assert json.loads(old.stdout) == json.loads(new.stdout)
    assert json.loads(old.stdout)["TransformInput"]["SplitType"] == "Line"
    note = "note: SageMaker needs s3:// URIs for S3Uri and S3OutputPath\n"
    assert old.stderr == DEPRECATED.format("transform") + "transform: " + note
    assert new.stderr == "sagemaker-tfs transform: " + note
    help_text = script("transform", "--help", expect=0)
    assert help_text.stdout.startswith("usage: transform [-h] --model MODEL [--request FILE] ")
    assert help_text.stderr == DEPRECATED.format("transform")
    refused = script("transform", expect=2)
    assert refused.stderr.splitlines()[0] + "\n" == DEPRECATED.format("transform")
    assert refused.stderr.splitlines()[-1] == "transform: error: the following arguments are required: --model"


def test_the_package_model_alias_says_it_is_deprecated_then_works_as_before(tmp_path):
    export = tmp_path / "export"
    shutil.copytree(paths.HALF_PLUS_THREE / "00000123", export / "1")
    built = script("package-model", "build", export, "-o", tmp_path / "model.tar.gz", expect=0)
    assert built.stderr == DEPRECATED.format("package-model")
    assert built.stdout.startswith(f"wrote {tmp_path / 'model.tar.gz'}\n")
    with tarfile.open(tmp_path / "model.tar.gz") as archive:
        assert "1/saved_model.pb" in archive.getnames()
    checked = script("package-model", "check", tmp_path / "model.tar.gz", expect=0)
    assert (
        checked.stdout == script("sagemaker-tfs", "package-model", "check", tmp_path / "model.tar.gz", expect=0).stdout
    )
    assert checked.stdout.startswith(f"{tmp_path / 'model.tar.gz'}: OK\n")
    old = script("package-model", "check", tmp_path / "none", expect=1)
    new = script("sagemaker-tfs", "package-model", "check", tmp_path / "none", expect=1)
    refusal = f"package-model: error: {tmp_path / 'none'} does not exist\n"
    assert old.stderr == DEPRECATED.format("package-model") + refusal
    assert new.stderr == "sagemaker-tfs " + refusal


def test_serve_and_tfs_model_server_stay_commands_of_their_own():
    assert script("serve", "--help", expect=0).stdout == script("sagemaker-tfs", "serve", "--help", expect=0).stdout
    result = script("tfs-model-server", "--help", expect=0)
    assert result.stdout.startswith("usage: tfs-model-server --port=8500 ")
    assert result.stderr == ""


def test_importing_the_cli_imports_no_command_module():
    code = "import sys, sagemaker_tfs.cli; print(' '.join(sorted(sys.modules)))"
    modules = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert [m for m in modules if m.startswith("sagemaker_tfs")] == [
        "sagemaker_tfs",
        "sagemaker_tfs.cli",
        "sagemaker_tfs.errors",
    ]
    assert not {"tensorflow", "numpy", "grpc", "falcon", "gunicorn", "requests", "google.protobuf"} & set(modules)


def test_model_server_without_the_extra_says_what_to_install(monkeypatch, capsys):
    from sagemaker_tfs.stack import extras

    monkeypatch.setattr(extras, "missing", lambda extra: ["tensorflow", "uvloop"] if extra == "model-server" else [])
    assert cli.main(["model-server", "--port=8500"]) == 1
    assert capsys.readouterr().err == (
        "sagemaker-tfs model-server: the embedded model server is not installed (missing tensorflow, uvloop); install "
        "the model-server extra (pip install 'sagemaker-tfs[model-server]'), or run tensorflow_model_server\n"
    )
