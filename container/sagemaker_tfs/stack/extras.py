"""Which packages of an extra (pyproject.toml's optional dependencies) are missing, read from our own metadata.

The serving image installs the base only (no `model-server` extra: no TensorFlow), so what is installed is
asked of the package metadata rather than by importing (importing TensorFlow takes seconds, and the image's
`tensorflow` namespace of protos would pass an import check).
"""

from __future__ import annotations

import importlib.metadata
import re

DISTRIBUTION = "sagemaker-tfs"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]""")


def missing(extra: str) -> list[str]:
    """The distributions that `extra` requires and that are not installed; [] when sagemaker-tfs itself is not
    installed (run from a source tree, there is nothing to check against)."""
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    names: list[str] = []
    for requirement in requirements:
        marker = _EXTRA.search(requirement)
        if marker and marker.group(1) == extra:
            name = _NAME.match(requirement)
            assert name is not None  # (a requirement starts with a distribution name: PEP 508)
            names.append(name.group())
    return [name for name in names if not _installed(name)]


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
