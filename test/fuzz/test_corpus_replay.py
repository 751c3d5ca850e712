"""Every fuzz corpus (fuzz/corpus/<target>/) replayed through its harness's oracle: deterministic, no atheris.
A parser change that breaks an oracle, or brings back a fixed finding (finding-* files), fails here."""

import importlib

import pytest

from fuzz import targets


def test_every_target_has_a_corpus_and_names_its_modules() -> None:
    assert targets.names(), "no harness in fuzz/targets"
    for name in targets.names():
        assert targets.inputs(name), f"fuzz/corpus/{name} is empty: run scripts/fuzz.sh {name}"
        harness = targets.load(name)
        for module in harness.MODULES:
            importlib.import_module(module)


@pytest.mark.parametrize("name", targets.names())
def test_corpus_replays_without_a_finding(name: str) -> None:
    harness = targets.load(name)
    for path in targets.inputs(name):
        try:
            harness.one_input(path.read_bytes())
        except Exception as exc:
            raise AssertionError(f"fuzz/corpus/{name}/{path.name}: {type(exc).__name__}: {exc}") from exc
