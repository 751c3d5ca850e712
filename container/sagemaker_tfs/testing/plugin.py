"""The pytest plugin (entry point `sagemaker_tfs`, in the pytest11 group): the `sagemaker_endpoint` fixture. It
imports the app only when a test asks for the fixture, so that it costs nothing to test sessions that do not."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .endpoint import Endpoint


@pytest.fixture
def sagemaker_endpoint() -> Iterator[Callable[..., Endpoint]]:
    """sagemaker_endpoint(model_dir, env=None, stack=False) -> an Endpoint, closed after the test. In-process
    endpoints of one model folder share its model servers for the whole session."""
    from .endpoint import Endpoint

    opened: list[Endpoint] = []

    def make(model_dir: str | Path, env: Mapping[str, str] | None = None, stack: bool = False) -> Endpoint:
        opened.append(Endpoint(model_dir, env, stack))
        return opened[-1]

    yield make
    for endpoint in reversed(opened):
        endpoint.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The shared model servers stop with the session (if any started)."""
    model_servers = sys.modules.get(f"{__package__}.model_servers")
    if model_servers is not None:
        model_servers.stop_all()
