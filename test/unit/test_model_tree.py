"""Model discovery and validation: the layouts served, the mistakes refused, the configs rendered."""

import shutil
from pathlib import Path

import paths
import pytest
from google.protobuf import text_format
from sagemaker_tfs.config import Settings
from sagemaker_tfs.shared.model_tree import ModelTreeError, find_models, model_config_text
from sagemaker_tfs.stack.commands import batching_parameters_text
from tensorflow_serving.config import model_server_config_pb2


def saved_model(path: Path) -> Path:
    """A version folder holding a (reference) SavedModel."""
    shutil.copytree(paths.HALF_PLUS_TWO / "00000123", path)
    return path


def test_versions_at_the_root_are_one_model_named_after_the_folder(tmp_path):
    root = tmp_path / "model"
    saved_model(root / "1538687370")
    (root / "code").mkdir()
    (root / "code" / "inference.py").write_text("")
    tree = find_models(root)
    assert [(m.name, m.versions) for m in tree.models] == [("model", (1538687370,))]
    assert tree.default_model == "model"
    assert tree.script == root / "code" / "inference.py"


def test_named_models_each_with_versions(tmp_path):
    saved_model(tmp_path / "b" / "2")
    saved_model(tmp_path / "b" / "00010")
    saved_model(tmp_path / "a" / "1")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / "b" / "notes").mkdir()
    tree = find_models(tmp_path)
    assert [(m.name, m.versions) for m in tree.models] == [("a", (1,)), ("b", (2, 10))]
    assert tree.default_model == "a"
    assert tree.script is None
    assert find_models(tmp_path, default_model="b").default_model == "b"


def test_unknown_default_model_is_refused(tmp_path):
    saved_model(tmp_path / "a" / "1")
    with pytest.raises(ModelTreeError, match="SAGEMAKER_TFS_DEFAULT_MODEL_NAME='x' is not a model in .*; found: a"):
        find_models(tmp_path, default_model="x")


def test_missing_model_directory(tmp_path):
    with pytest.raises(ModelTreeError, match=r"model directory .*nope does not exist \(set SAGEMAKER_MODEL_DIR"):
        find_models(tmp_path / "nope")


def test_empty_directory_explains_the_layout(tmp_path):
    with pytest.raises(ModelTreeError) as err:
        find_models(tmp_path)
    assert str(err.value) == (
        f"no SavedModel found in {tmp_path}: expected <model_dir>/<version>/saved_model.pb or "
        "<model_dir>/<model name>/<version>/saved_model.pb, where <version> is a number such as 1"
    )


def test_saved_model_without_version_folder_is_named(tmp_path):
    saved_model(tmp_path / "export" / "v1")
    with pytest.raises(ModelTreeError) as err:
        find_models(tmp_path)
    assert str(err.value).startswith(
        f"no SavedModel found in a version folder; found outside a version folder in {tmp_path}: "
        f"{tmp_path}/export/v1/saved_model.pb; expected <model_dir>/<version>/saved_model.pb"
    )


def test_non_numeric_version_next_to_a_good_model_is_refused(tmp_path):
    saved_model(tmp_path / "good" / "1")
    saved_model(tmp_path / "other" / "1.0")
    with pytest.raises(
        ModelTreeError, match=r"found SavedModels outside a version folder in .*other/1.0/saved_model.pb"
    ):
        find_models(tmp_path)


def test_version_folder_without_saved_model_is_refused(tmp_path):
    shutil.copytree(paths.BAD_HALF_PLUS_TWO, tmp_path / "bad")
    with pytest.raises(ModelTreeError) as err:
        find_models(tmp_path)
    assert str(err.value) == (
        f"version folder {tmp_path}/bad/00000123 has no saved_model.pb (it holds checkpoint, "
        "export, export.meta); a version folder must contain a SavedModel as written by "
        "tf.saved_model.save"
    )


def test_duplicate_version_numbers_are_refused(tmp_path):
    saved_model(tmp_path / "m" / "1")
    saved_model(tmp_path / "m" / "001")
    with pytest.raises(ModelTreeError, match="are the same version 1; keep one"):
        find_models(tmp_path)


def test_script_inside_the_version_folder_is_refused(tmp_path):
    saved_model(tmp_path / "1")
    (tmp_path / "1" / "code").mkdir()
    (tmp_path / "1" / "code" / "inference.py").write_text("")
    with pytest.raises(ModelTreeError) as err:
        find_models(tmp_path)
    assert str(err.value) == (
        f"found {tmp_path}/1/code/inference.py, but the handler script must be "
        f"{tmp_path}/code/inference.py (a code/ folder next to the version folders); move it there"
    )


def test_code_folder_is_not_a_model_and_stray_copies_are_reported(tmp_path, caplog):
    saved_model(tmp_path / "1")
    (tmp_path / "code" / "lib" / "pkg").mkdir(parents=True)
    (tmp_path / "code" / "inference.py").write_text("")
    (tmp_path / "code" / "lib" / "pkg" / "inference.py").write_text("")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "inference.py").write_text("")
    tree = find_models(tmp_path)
    assert tree.names == [tmp_path.name]
    assert tree.script == tmp_path / "code" / "inference.py"
    assert f"ignoring {tmp_path}/old/inference.py: only {tmp_path}/code/inference.py is used" in caplog.text
    assert "lib/pkg" not in caplog.text


def test_model_config_serves_every_version(tmp_path):
    saved_model(tmp_path / "m" / "1")
    saved_model(tmp_path / "m" / "2")
    config = text_format.Parse(model_config_text(find_models(tmp_path)), model_server_config_pb2.ModelServerConfig())
    (entry,) = config.model_config_list.config
    assert entry.name == "m"
    assert entry.base_path == str(tmp_path / "m")
    assert entry.model_platform == "tensorflow"
    assert list(entry.model_version_policy.specific.versions) == [1, 2]


def test_batching_parameters_from_settings():
    settings = Settings.from_env(
        {
            "SAGEMAKER_TFS_MAX_BATCH_SIZE": "16",
            "SAGEMAKER_TFS_BATCH_TIMEOUT_MICROS": "500",
            "SAGEMAKER_TFS_NUM_BATCH_THREADS": "2",
            "SAGEMAKER_TFS_MAX_ENQUEUED_BATCHES": "9",
        }
    )
    assert batching_parameters_text(settings) == (
        "max_batch_size { value: 16 }\nbatch_timeout_micros { value: 500 }\n"
        "num_batch_threads { value: 2 }\nmax_enqueued_batches { value: 9 }\n"
    )
