"""Ready before Spark: a table's offsets come from its log files, the SparkSession starts after
``/readyz`` turned ready, and a Spark that fails to start turns the service unready with the reason.
Fakes at the seams (the committer, the Spark handle); no JVM."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from commit_service.config import ServiceConfig
from commit_service.delta.deferred import DeferredCommitter
from commit_service.delta.log import LogReadError
from commit_service.errors import SparkSetupError
from commit_service.http.app import create_app
from commit_service.http.runtime import runtime
from commit_service.ports import Committer, TableSnapshot
from commit_service.spark.session import SparkHandle
from lakegate_core.configfile import build
from lakegate_core.types import PartitionOffsets
from tests.unit.fakes import CONFIG, FakeCommitter


def test_offsets_come_from_the_log_and_delta_is_built_once_when_needed() -> None:
    built: list[int] = []
    real = FakeCommitter()

    def make() -> Committer:
        built.append(1)
        return real  # type: ignore[return-value]

    snap = TableSnapshot(7, PartitionOffsets({("orders", 0): 70}))
    deferred = DeferredCommitter("orders", lambda: snap, make)
    assert deferred.snapshot() == snap and built == [], "no Spark for the offsets"
    deferred.warm()
    deferred.file_count()
    assert built == [1], "built once, on the first call that needs Delta"


def test_a_log_the_reader_cannot_be_sure_of_is_read_through_delta() -> None:
    def unsure() -> TableSnapshot:
        raise LogReadError("a V2 checkpoint")

    real = FakeCommitter()
    deferred = DeferredCommitter("orders", unsure, lambda: real)  # type: ignore[arg-type,return-value]
    assert deferred.snapshot() == real.snapshot()


class SlowSpark(SparkHandle):
    """A Spark handle whose session starts when the test says, or fails to."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__(settings=object())  # type: ignore[arg-type]
        self.go = threading.Event()
        self.fail = fail

    def preflight(self) -> None:
        pass

    def ensure(self) -> Any:
        assert self.go.wait(10)
        if self.fail:
            raise SparkSetupError("Spark did not start: the JVM exited")
        self.session = None  # the loop then runs on a plain thread
        return self.session


def started_app(spark: SlowSpark) -> Any:
    app = create_app(build(ServiceConfig, CONFIG), committer_factory=lambda t: FakeCommitter(), start=False)
    rt = runtime(app)
    rt.spark = spark
    from commit_service.http.app import _start

    threading.Thread(target=_start, args=(rt,), daemon=True).start()
    return app


def wait_status(app: Any, status: str) -> dict[str, Any]:
    client = app.test_client()
    deadline = time.monotonic() + 10
    while (body := client.get("/readyz").json)["status"] != status:
        assert time.monotonic() < deadline, f"/readyz never said {status}: {body}"
        time.sleep(0.02)
    return dict(body)


@pytest.mark.parametrize("fail", [False, True], ids=["starts", "fails"])
def test_ready_while_spark_starts_and_unready_if_it_cannot(fail: bool) -> None:
    spark = SlowSpark(fail)
    app = started_app(spark)
    wait_status(app, "ready")  # the offsets are loaded; Spark has not started yet
    assert not spark.go.is_set()
    spark.go.set()
    if fail:
        body = wait_status(app, "failed")
        assert body["error"]["code"] == "spark_setup"
    else:
        deadline = time.monotonic() + 10
        while runtime(app).coordinator._thread is None:  # the commit loop starts after Spark
            assert time.monotonic() < deadline
            time.sleep(0.02)
        runtime(app).coordinator.stop()
