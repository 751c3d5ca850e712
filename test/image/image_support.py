"""What both image tests use: a handler script whose requirements.txt installs a small package from a local
wheel (no network at run time), and where the package was found."""

from __future__ import annotations

import zipfile
from pathlib import Path

import model_dirs

PACKAGE = "sagemaker_tfs_test_extra"

REQUIREMENTS = f"""
    # a wheel of code/wheels: no network needed (relative to this file)
    --no-index
    --find-links wheels
    {PACKAGE.replace("_", "-")}==1.0
"""

# Imports the package of requirements.txt (so the workers can) and tells where it was found.
HANDLER = f"""
    import json

    import {PACKAGE}


    def input_handler(data, context):
        return json.dumps({{"instances": json.loads(data.read())["instances"]}})


    def output_handler(response, context):
        return json.dumps({{"predictions": json.loads(response.content)["predictions"],
                            "extra": {PACKAGE}.VALUE, "extra_file": {PACKAGE}.__file__}}), "application/json"
"""


def write_wheel(folder: Path) -> Path:
    """A pure-Python wheel of PACKAGE 1.0 (VALUE = "extra 1.0"), made by hand: no build backend needed."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"{PACKAGE}-1.0"
    path = folder / f"{dist}-py3-none-any.whl"
    files = {
        f"{PACKAGE}/__init__.py": 'VALUE = "extra 1.0"\n',
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE.replace('_', '-')}\nVersion: 1.0\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}.dist-info/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{dist}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return path


def write_code_with_requirements(model_dir: Path) -> Path:
    """model_dir/code: inference.py importing PACKAGE, requirements.txt installing it from code/wheels."""
    model_dirs.write_code(model_dir, HANDLER, {"requirements.txt": REQUIREMENTS})
    write_wheel(model_dir / "code" / "wheels")
    return model_dir
