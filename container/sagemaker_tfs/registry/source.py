"""A load's `url`: where it really is, what it holds, and what a load would read (checks 3 and 5-7 of
docs/multi-model.md §3).

Every path is resolved (symlinks followed, `..` collapsed) and must stay inside the real model root, and
everything the load reads (version folders and their files, the model folder of the named layout, `code/` and
what is in it) inside the real `url`: a symlink anywhere in the tree that points outside is refused, so that
neither a caller of the load API nor a model archive can make the container read or run a file outside the
root. The load then reads through the resolved paths only.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import HandlerError
from ..shared.model_tree import ModelTreeError, find_models

log = logging.getLogger("sagemaker_tfs.multi_model")


class LoadError(HandlerError):
    """A management request refused with an HTTP status and the spec's text (answered by the app's error
    mapping, web/app.error_answer)."""


@dataclass(frozen=True)
class ModelSource:
    """What a load found at its url, every path resolved."""

    url: str  # as given
    real: Path  # the url's real path
    base_path: Path  # the folder holding the version folders
    versions: tuple[int, ...]
    code: Path | None  # <url>/code, when it is a folder
    script: Path | None  # <url>/code/inference.py, when it is a file


def check_url_form(url: object) -> str:
    """Check 3: `url` is a string and an absolute path (never joined to the working directory)."""
    if url is None:
        raise LoadError(400, 'missing "url"')
    if not isinstance(url, str) or not os.path.isabs(url) or "\0" in url:
        raise LoadError(400, f"\"url\" must be an absolute path, got '{url}'")
    return url


def inspect(name: str, url: str, root: str | Path) -> ModelSource:
    """Checks 5 to 7 for a url that passed check 3; LoadError otherwise."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(url))
    if real == real_root or not real.is_relative_to(real_root):
        raise LoadError(400, f"url {url} is outside the model root {root}")
    if not real.is_dir():
        raise LoadError(404, f"Could not find valid base path {url} for servable {name}: {url} is not a folder")
    _check_confined(name, url, real)
    try:
        tree = find_models(real)
    except ModelTreeError as exc:
        raise LoadError(
            404, f"Could not find valid base path {url} for servable {name}: {str(exc).replace(str(real), url)}"
        ) from None
    if len(tree.models) > 1:
        names = ", ".join(model.name for model in tree.models)
        raise LoadError(
            404,
            f"Could not find valid base path {url} for servable {name}: {url} holds "
            f"{len(tree.models)} models ({names}); a multi-model endpoint serves one model per url",
        )
    model = tree.models[0]
    code = real / "code"
    script = code / "inference.py"
    if (code / "requirements.txt").is_file():
        log.warning(
            "%s/code/requirements.txt of model %s is not installed: a load does not run pip; use "
            "%s/code/lib or the universal requirements.txt",
            url,
            name,
            url,
        )
    return ModelSource(
        url,
        real,
        model.base_path,
        model.versions,
        code if code.is_dir() else None,
        script if script.is_file() else None,
    )


def _check_confined(name: str, url: str, real: Path) -> None:
    """Check 6: every entry below the url (hidden ones aside: nothing reads them) resolves inside it."""
    for folder, dirs, files in os.walk(real):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for entry in [*dirs, *(f for f in files if not f.startswith("."))]:
            path = Path(folder, entry)
            if path.is_symlink() and not Path(os.path.realpath(path)).is_relative_to(real):
                shown = Path(url, path.relative_to(real))
                raise LoadError(400, f"{shown} in model {name} resolves outside {url}")
