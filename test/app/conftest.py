"""Fixtures of the in-process app tests: one real model server for the session, apps built per module or test."""

from __future__ import annotations

import pytest
from app_harness import InProcessApp
from app_support import model_server  # noqa: F401 (the session's model server fixture)


@pytest.fixture
def make_app(model_server):  # noqa: F811 - the imported fixture, as pytest passes it
    """make_app(model_dir, **InProcessApp options) -> an app, closed after the test."""
    apps: list[InProcessApp] = []

    def make(model_dir, server=model_server, **options) -> InProcessApp:
        apps.append(InProcessApp(model_dir, server, **options))
        return apps[-1]

    yield make
    for app in apps:
        app.close()
