"""The HTTP tests' fixtures: a fake committer and a test client of the app built over it."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from commit_service.config import ServiceConfig
from commit_service.http.app import create_app
from commit_service.http.runtime import runtime
from lakegate_core.configfile import build
from tests.unit.fakes import CONFIG, FakeCommitter


@pytest.fixture
def committer() -> FakeCommitter:
    return FakeCommitter()


@pytest.fixture
def client(committer: FakeCommitter) -> FlaskClient:
    cfg = build(ServiceConfig, CONFIG)
    app = create_app(cfg, committer_factory=lambda t: committer, start=False)
    runtime(app).coordinator.load()
    return app.test_client()
