"""The handler-contract detector (handler_contract.py) and its two callers: the app, which asks about an imported
module, and `package-model`, which reads the source without running it. Both choose the same contract for every
script and refuse the same scripts, each in its own words."""

import types
from pathlib import Path

import pytest
from sagemaker_tfs.app import script as app_script
from sagemaker_tfs.packaging import PackagingError, handler_contract
from sagemaker_tfs.shared.handler_contract import Contract, IncompleteContract, detect

PAIR = "def input_handler(data, context):\n    pass\n\ndef output_handler(response, context):\n    pass\n"
HOW_TO_FIX = "define handler(data, context), or both input_handler(data, context) and output_handler(response, context)"


@pytest.mark.parametrize(
    "names, contract",
    [
        ({"handler"}, Contract.HANDLER),
        (["handler", "input_handler", "output_handler"], Contract.HANDLER),  # handler wins, as in the original
        ({"input_handler", "output_handler", "other"}, Contract.PAIR),
    ],
)
def test_detect(names, contract):
    assert detect(names) is contract


@pytest.mark.parametrize(
    "names, present",
    [
        ({"input_handler"}, ("input_handler",)),
        (["output_handler", "x"], ("output_handler",)),
        (set(), ()),
    ],
)
def test_detect_refuses_an_incomplete_script(names, present):
    with pytest.raises(IncompleteContract) as error:
        detect(names)
    assert error.value.present == present


def write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "inference.py"
    path.write_text(source)
    return path


def app_contract(path: Path) -> Contract:
    module = types.ModuleType("inference")
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return app_script.contract(module, path).contract


@pytest.mark.parametrize(
    "source, contract",
    [
        ("def handler(data, context):\n    pass\n", Contract.HANDLER),
        ("handler = lambda data, context: data\n", Contract.HANDLER),
        ("from os.path import join as handler\n", Contract.HANDLER),  # imported names count
        (PAIR, Contract.PAIR),
        (PAIR + "class handler:\n    pass\n", Contract.HANDLER),
    ],
)
def test_both_callers_choose_the_same_contract(tmp_path, source, contract):
    path = write(tmp_path, source)
    assert handler_contract(path) is contract
    assert app_contract(path) is contract


@pytest.mark.parametrize(
    "source, packaging_found, app_found",
    [
        ("def input_handler(data, context):\n    pass\n", "defines input_handler", "defines only input_handler"),
        ("def output_handler(response, context):\n    pass\n", "defines output_handler", "defines only output_handler"),
        ("x = 1\n", "defines none of the handler functions", "defines none of them"),
    ],
)
def test_both_callers_refuse_the_same_scripts(tmp_path, source, packaging_found, app_found):
    path = write(tmp_path, source)
    with pytest.raises(PackagingError) as packaging_error:
        handler_contract(path)
    assert str(packaging_error.value) == f"{path} {packaging_found}: {HOW_TO_FIX}"
    with pytest.raises(app_script.ScriptError) as app_error:
        app_contract(path)
    assert str(app_error.value) == (
        f"Handlers are not implemented correctly in user script. {path} {app_found}: {HOW_TO_FIX}"
    )
