"""Fixtures of the tests of the app under gunicorn: one real model server for the session, apps started per module
or test."""

from __future__ import annotations

import pytest
from app_support import model_server  # noqa: F401 (the session's model server fixture)
from gunicorn_harness import App


@pytest.fixture
def start_app(model_server):  # noqa: F811 (the fixture imported above, which pytest passes by its name)
    """start_app(model_dir, **App options) -> a started App, stopped after the test."""
    apps: list[App] = []

    def start(model_dir, wait_for: int | None = 200, server=model_server, **options) -> App:
        app = App(model_dir, server, **options)
        apps.append(app)
        return app.start(wait_for=wait_for)

    yield start
    for app in apps:
        app.stop()
