"""The service's test-only crash points (``commit_service.faults``): inert unless armed, and an
armed point fires once, for the first process that reaches it."""

from __future__ import annotations

import importlib
import signal
from pathlib import Path

import pytest

from commit_service import faults


def test_points_are_inert_without_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(faults.ENV, raising=False)
    module = importlib.reload(faults)
    monkeypatch.setattr(module.os, "killpg", lambda *_: pytest.fail("killed without being armed"))
    module.crash_point(module.AFTER_COMMIT)


def test_an_armed_point_kills_the_process_group_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(faults.ENV, str(tmp_path))
    module = importlib.reload(faults)
    kills: list[tuple[int, int]] = []
    monkeypatch.setattr(module.os, "killpg", lambda group, sig: kills.append((group, sig)))
    module.crash_point(module.BEFORE_COMMIT)
    assert kills == [], "not armed yet"
    (tmp_path / module.BEFORE_COMMIT).touch()
    module.crash_point(module.AFTER_COMMIT)
    assert kills == [], "another point"
    module.crash_point(module.BEFORE_COMMIT)
    module.crash_point(module.BEFORE_COMMIT)
    assert kills == [(module.os.getpgid(0), signal.SIGKILL)]
    assert not (tmp_path / module.BEFORE_COMMIT).exists()
    monkeypatch.delenv(faults.ENV)
    importlib.reload(faults)
