"""tensorflow-protos/ (the serving image's TensorFlow protos) is the installed TensorFlow's copy, unchanged."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re

from paths import REPO

spec = importlib.util.spec_from_file_location(
    "vendor_tensorflow_protos", REPO / "scripts" / "vendor_tensorflow_protos.py"
)
vendor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(vendor)

FIX = "run scripts/vendor_tensorflow_protos.py"


def test_the_copy_holds_exactly_what_tensorflow_serving_api_imports():
    needed = vendor.needed_files()
    copied = sorted(str(path.relative_to(vendor.VENDORED)) for path in (vendor.VENDORED / "tensorflow").rglob("*.py"))
    assert copied == needed, FIX
    assert "tensorflow/core/framework/tensor_pb2.py" in needed and "tensorflow/__init__.py" not in needed


def test_the_copy_is_the_installed_tensorflows():
    source = vendor.site_root("tensorflow")
    changed = [
        name for name in vendor.needed_files() if (source / name).read_bytes() != (vendor.VENDORED / name).read_bytes()
    ]
    assert changed == [], FIX


def test_the_copys_version_is_the_installed_tensorflows():
    version = re.search(r'^version = "([^"]+)"', (vendor.VENDORED / "pyproject.toml").read_text(), re.M).group(1)
    assert version == importlib.metadata.version("tensorflow"), FIX
