"""The sidecar's pure parts and its round, with fakes at its seams (no Kafka, Connect or S3)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from lakegate_core.errors import ProtocolError
from lakegate_core.protocol import (
    CsvLayout,
    DataFile,
    FileFormat,
    FileReceipt,
    FileStatus,
    LeaseGrant,
    LeaseRequest,
    LeaseResponse,
    Manifest,
    ManifestReceipt,
    OffsetSpan,
)
from lakegate_core.sink_config import ConfluentLayout, csv_layout, output_format
from lakegate_core.types import PartitionOffsets, TopicPartition
from sidecar.client import ServiceClient
from sidecar.config import LoopSettings, load_config
from sidecar.connect import ConnectorView
from sidecar.errors import ServiceError, SidecarConfigError
from sidecar.listing import WINDOW
from sidecar.loop import SidecarLoop
from sidecar.metrics import SidecarMetrics
from sidecar.storage import LocalLister, NamePattern, StoredFile, list_files
from sidecar.tracker import complete_files


@pytest.mark.parametrize(
    ("naming", "key", "expected"),
    [
        ("aiven", "orders-0-100", ("orders", 0, 100)),
        ("aiven", "my-topic-with-dashes-12-3400", ("my-topic-with-dashes", 12, 3400)),
        ("aiven", "orders-1-2-0", ("orders-1", 2, 0)),
        ("aiven", "orders-0-100.gz", ("orders", 0, 100)),
        ("aiven", "orders-x-100", None),
        ("aiven", "orders-0-100-", None),
        ("aiven", "README", None),
        ("confluent", "topics/orders/partition=3/orders+3+0000000042.parquet", ("orders", 3, 42)),
        ("confluent", "topics/orders/partition=3/other+3+42.parquet", None),
        (
            {"regex": r"(?P<topic>\w+)/(?P<partition>\d+)/(?P<start_offset>\d+)\.json"},
            "clicks/2/77.json",
            ("clicks", 2, 77),
        ),
    ],
)
def test_name_patterns(naming: Any, key: str, expected: tuple[str, int, int] | None) -> None:
    parsed = NamePattern(naming).parse(key, 10)
    assert (None if parsed is None else (parsed.topic, parsed.partition, parsed.start_offset)) == expected


def test_prefix_and_bad_patterns() -> None:
    p = NamePattern("aiven", "orders/data/")
    assert p.parse("orders/data/orders-0-5", 1) is not None and p.parse("elsewhere/orders-0-5", 1) is None
    assert p.key_prefix("orders") == "orders/data/orders-"
    with pytest.raises(SidecarConfigError, match="named groups missing"):
        NamePattern({"regex": r"(?P<topic>.+)-(?P<partition>\d+)"})
    with pytest.raises(SidecarConfigError, match="is not one of"):
        NamePattern("hive")


def sf(start: int, p: int = 0) -> StoredFile:
    return StoredFile(f"orders-{p}-{start}", 100, "orders", p, start)


def test_completeness_ranges() -> None:
    files = [sf(0), sf(100), sf(250), sf(400)]
    done = complete_files(files, connect_committed=300, table_next=0)
    assert [(c.file.start_offset, c.end_offset) for c in done] == [(0, 99), (100, 249), (250, 299)]
    assert [c.file.start_offset for c in complete_files(files, 300, table_next=100)] == [100, 250]
    assert complete_files(files, None, 0) == []  # Connect has committed nothing yet
    assert complete_files(files, 0, 0) == []
    assert [(c.file.start_offset, c.end_offset) for c in complete_files([sf(0), sf(0)], 50, 0)] == [(0, 49)]


def test_ownership_from_group_members() -> None:
    from lakegate_core.connect_group import Assignment, GroupReader, assignments

    members = [
        {
            "client_id": "connector-consumer-snk-0",
            "client_host": "/10.0.0.1",
            "member_assignment": {"assigned_partitions": [{"topic": "a", "partitions": [0, 1]}]},
        },
        {
            "client_id": "connector-consumer-snk-1",
            "client_host": "/10.0.0.2",
            "member_assignment": {"assigned_partitions": [{"topic": "a", "partitions": [2]}]},
        },
        {
            "client_id": "connector-consumer-snk-other-0",
            "member_assignment": {"assigned_partitions": [{"topic": "b", "partitions": [0]}]},
        },
        {
            "client_id": "someone-else",
            "member_assignment": {"assigned_partitions": [{"topic": "a", "partitions": [9]}]},
        },
    ]
    got = assignments(members, "snk")
    assert got == {
        ("a", 0): Assignment(0, "10.0.0.1"),
        ("a", 1): Assignment(0, "10.0.0.1"),
        ("a", 2): Assignment(1, "10.0.0.2"),
    }

    class Admin:
        def describe_groups(self, groups: list[str]) -> dict[str, Any]:
            return {"connect-snk": {"members": members}}

    reader = GroupReader(Admin)
    assert reader.owned("snk", {0}) == {("a", 0), ("a", 1)}
    assert reader.owned("snk", {0, 1}) == {("a", 0), ("a", 1), ("a", 2)}
    assert reader.owned("snk", set()) == set()


def test_log_ends_ask_for_the_latest_offset_of_each_partition() -> None:
    from kafka import TopicPartition as KafkaPartition
    from kafka.admin import OffsetSpec
    from kafka.structs import OffsetAndTimestamp

    from lakegate_core.connect_group import GroupReader

    asked: list[dict[Any, Any]] = []

    class Admin:
        def list_partition_offsets(self, specs: dict[Any, Any]) -> dict[Any, Any]:
            asked.append(specs)
            return {k: OffsetAndTimestamp(40 + k.partition, -1, None) for k in specs}

    reader = GroupReader(Admin)
    assert reader.log_ends([TopicPartition("a", 0), TopicPartition("a", 2)]) == {("a", 0): 40, ("a", 2): 42}
    assert asked == [{KafkaPartition("a", 0): OffsetSpec.LATEST, KafkaPartition("a", 2): OffsetSpec.LATEST}]
    assert reader.log_ends([]) == {} and len(asked) == 1, "nothing to ask: no request"


class FakeConnect:
    def __init__(self, views: dict[str, ConnectorView]) -> None:
        self.known = views

    def views(self, names: tuple[str, ...], regex: str | None, worker_id: str) -> list[ConnectorView]:
        return [self.known.get(n, ConnectorView(n, "MISSING", frozenset(), ())) for n in names]


class FakeGroups:
    def __init__(self, owned: set[tuple[str, int]], committed: dict[tuple[str, int], int]) -> None:
        self.owned_set, self.committed_map = owned, committed
        self.ends: dict[tuple[str, int], int] = {}  # the partitions' log ends
        self.end_reads: list[list[TopicPartition]] = []  # each log_ends call's partitions

    def owned(self, connector: str, tasks: Iterable[int]) -> set[TopicPartition]:
        return {TopicPartition(*tp) for tp in self.owned_set}

    def committed(self, connector: str) -> PartitionOffsets:
        return PartitionOffsets(self.committed_map)

    def log_ends(self, partitions: Iterable[TopicPartition]) -> PartitionOffsets:
        self.end_reads.append(sorted(partitions))
        return PartitionOffsets({tp: self.ends[tp] for tp in partitions if tp in self.ends})

    def close(self) -> None:
        pass


class FakeService:
    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = {}
        self.manifests: list[Manifest] = []
        self.claims: list[LeaseRequest] = []
        self.held: dict[tuple[str, int], int] = {}  # LeaseGrant.held_next per partition (absent: not said)
        self.runs: dict[tuple[str, int], tuple[OffsetSpan, ...]] = {}  # LeaseGrant.held_after per partition
        self.due: dict[tuple[str, int], int] = {}  # LeaseGrant.due_ms per partition (absent: no catch-up)
        self.now_ms: int | None = None  # LeaseResponse.now_ms

    def table_offsets(self) -> PartitionOffsets:
        return PartitionOffsets(self.offsets)

    def claim(self, request: LeaseRequest) -> LeaseResponse:
        self.claims.append(request)
        grants = (
            LeaseGrant(
                t,
                p,
                True,
                7,
                held_next=self.held.get((t, p)),
                due_ms=self.due.get((t, p)),
                held_after=self.runs.get((t, p)),
            )
            for t, p in request.partitions
        )
        return LeaseResponse(True, tuple(grants), self.now_ms)

    def send(self, manifest: Manifest) -> ManifestReceipt:
        self.manifests.append(manifest)
        return ManifestReceipt(
            manifest.manifest_id, tuple(FileReceipt(f.path, FileStatus.ACCEPTED) for f in manifest.files)
        )


def make_loop(
    tmp_path: Path,
    owned: set[tuple[str, int]],
    committed: dict[tuple[str, int], int],
    state: str = "RUNNING",
    clock: list[float] | None = None,
    view: ConnectorView | None = None,
    naming: str = "aiven",
) -> tuple[SidecarLoop, FakeService]:
    """A loop following one connector (``view``; by default ``snk`` of ``orders`` in ``state``)."""
    service = FakeService()
    view = view or ConnectorView("snk", state, frozenset({0}) if state == "RUNNING" else frozenset(), ("orders",))
    t = clock or [0.0]
    settings = LoopSettings(worker_id="w:8083", sidecar_id="sc", connectors=(view.name,), resend_after=30)
    loop = SidecarLoop(
        settings,
        connect=FakeConnect({view.name: view}),
        groups=FakeGroups(owned, committed),
        lister=LocalLister(tmp_path),
        pattern=NamePattern(naming),
        service=service,
        metrics=SidecarMetrics(60),
        clock=lambda: t[0],
    )
    return loop, service


def touch(tmp_path: Path, *names: str) -> None:
    for n in names:
        (tmp_path / n).write_bytes(b"x" * 10)


def test_round_reports_only_owned_complete_files_once(tmp_path: Path) -> None:
    touch(tmp_path, "orders-0-0", "orders-0-10", "orders-0-20", "orders-1-0", "junk.txt", "orders-9-0")
    clock = [0.0]
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 20, ("orders", 1): 5}, clock=clock)
    report = loop.run_once()
    [m] = service.manifests
    assert {f.lease_epoch for f in m.files} == {7}
    assert [(f.path.rsplit("/", 1)[1], f.start_offset, f.end_offset) for f in m.files] == [
        ("orders-0-0", 0, 9),
        ("orders-0-10", 10, 19),
    ]
    assert [f.modified_ms for f in m.files] == [
        (tmp_path / name).stat().st_mtime_ns // 1_000_000 for name in ("orders-0-0", "orders-0-10")
    ], "each file's modification time, as listed, goes with it"
    assert report.statuses == {"accepted": 2}
    loop.run_once()
    assert len(service.manifests) == 1, "not resent before resend_after"
    [mark] = service.claims[-1].watermarks
    assert (mark.topic, mark.partition, mark.connect_offset) == ("orders", 0, 20), (
        "the next claim says: all below 20 was sent"
    )
    clock[0] = 31
    loop.run_once()
    assert len(service.manifests) == 2, "resent when the table did not move"
    service.offsets = {("orders", 0): 20}
    clock[0] = 100
    loop.run_once()
    assert len(service.manifests) == 2 and loop._sent == {}


def test_a_file_the_service_holds_is_not_sent_again_until_it_is_dropped(tmp_path: Path) -> None:
    touch(tmp_path, "orders-0-0", "orders-0-10", "orders-0-20")
    clock = [0.0]
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 20}, clock=clock)

    def sent_names() -> list[str]:
        return [f.path.rsplit("/", 1)[1] for f in service.manifests[-1].files]

    loop.run_once()
    assert sent_names() == ["orders-0-0", "orders-0-10"]
    service.held[("orders", 0)] = 20  # both buffered, in one run from the committed offset
    for clock[0] in (31.0, 62.0, 93.0):  # past resend_after, round after round
        loop.run_once()
    assert len(service.manifests) == 1, "a held file is sent once"
    service.held[("orders", 0)] = 10  # the service dropped the second file
    clock[0] = 124.0
    loop.run_once()
    assert len(service.manifests) == 2 and sent_names() == ["orders-0-10"]
    service.held[("orders", 0)] = 0  # a restarted service holds nothing
    clock[0] = 155.0
    loop.run_once()
    assert sent_names() == ["orders-0-0", "orders-0-10"]


def test_files_the_service_holds_past_a_gap_are_not_sent_again_while_the_gap_waits(tmp_path: Path) -> None:
    touch(tmp_path, "orders-0-0", "orders-0-10", "orders-0-20")
    clock = [0.0]
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 30}, clock=clock)

    def sent_names() -> list[str]:
        return [f.path.rsplit("/", 1)[1] for f in service.manifests[-1].files]

    loop.run_once()
    assert sent_names() == ["orders-0-0", "orders-0-10", "orders-0-20"]
    # the first file was dropped (say quarantined): the service holds 10..29 past the gap at 0
    service.held[("orders", 0)] = 0
    service.runs[("orders", 0)] = (OffsetSpan(10, 29),)
    for clock[0] in (31.0, 62.0):  # past resend_after, round after round
        loop.run_once()
        assert sent_names() == ["orders-0-0"], "only the file the service does not hold is sent again"
    service.runs[("orders", 0)] = (OffsetSpan(20, 29),)  # the service dropped 10..19 too
    clock[0] = 93.0
    loop.run_once()
    assert sent_names() == ["orders-0-0", "orders-0-10"]
    del service.runs[("orders", 0)]  # a restarted service holds nothing
    clock[0] = 124.0
    loop.run_once()
    assert sent_names() == ["orders-0-0", "orders-0-10", "orders-0-20"]


def test_a_round_that_catches_up_is_followed_from_its_due_time_until_connect_reaches_the_log_end(
    tmp_path: Path,
) -> None:
    """The lease answer says when the table's round is due: the sidecar runs a round then, reads
    the log end once, and runs a round every catch_up_poll until a claim has carried that log
    end and Connect's committed offset has reached it (in between, reading only that offset);
    then back to the poll interval."""
    touch(tmp_path, "orders-0-0")
    clock = [0.0]
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 10}, clock=clock)
    groups = loop.groups
    assert isinstance(groups, FakeGroups)
    groups.ends = {("orders", 0): 25}
    tp = TopicPartition("orders", 0)

    def step_at(local: float) -> bool:  # the service's clock runs 100 s ahead of the sidecar's
        clock[0], service.now_ms = local, int((local + 100) * 1000)
        return loop.step() is not None

    service.due[("orders", 0)] = 102_000
    assert step_at(0.0)
    assert groups.end_reads == [], "not due yet: the log end is not read"
    assert loop.next_round_at(0.0) == pytest.approx(2.0), "the next round runs when the table's round is due"
    assert step_at(2.0)
    assert groups.end_reads == [[tp]]
    assert loop.next_round_at(2.0) == 2.25, "the log end must still reach the service"
    assert step_at(2.25)
    assert service.claims[-1].watermarks[0].log_end == 25
    assert loop.next_round_at(2.25) == 2.5, "Connect has not committed up to the log end yet"
    claims = len(service.claims)
    assert not step_at(2.5) and len(service.claims) == claims, "only Connect's offsets were read"
    groups.committed_map = {("orders", 0): 25}
    touch(tmp_path, "orders-0-10")
    assert step_at(2.75)
    assert [f.end_offset for f in service.manifests[-1].files] == [24], "the flush past the due time went out"
    assert service.claims[-1].watermarks[0].log_end is None, "a log end goes with the watermark of its read only"
    assert loop.next_round_at(2.75) == 7.75, "settled: back to the poll interval"
    assert groups.end_reads == [[tp]], "one log-end read per due time"
    service.due[("orders", 0)] = 112_000  # the round committed; the next one is due at 12 s (ours)
    assert step_at(7.75)
    assert loop.next_round_at(7.75) == pytest.approx(12.0)
    service.due.clear()  # the table stopped catching up
    assert step_at(8.0)
    assert loop.next_round_at(8.0) == 13.0 and [w.log_end for w in service.claims[-1].watermarks] == [None]


def test_known_content_spans_end_files_and_skip_orphans() -> None:
    files = [sf(0), sf(100), sf(150), sf(400)]  # 0 really holds 0..149: 100 is an orphan
    held = {("orders-0-0", 100): OffsetSpan(0, 149)}
    done = complete_files(files, connect_committed=400, table_next=0, holds=held)
    assert [(c.file.start_offset, c.end_offset) for c in done] == [(0, 149), (150, 399)]
    other_size = {("orders-0-0", 99): OffsetSpan(0, 149)}  # a span learnt of another object
    assert [c.end_offset for c in complete_files(files, 400, 0, holds=other_size)] == [99, 149, 399]


def test_a_receipt_saying_what_a_file_holds_changes_the_next_claim(tmp_path: Path) -> None:
    touch(tmp_path, "orders-0-0", "orders-0-10", "orders-0-15")
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 30})

    def answer(manifest: Manifest) -> ManifestReceipt:
        service.manifests.append(manifest)
        return ManifestReceipt(
            manifest.manifest_id,
            tuple(
                FileReceipt(f.path, FileStatus.REJECTED, "too short", holds=OffsetSpan(0, 14))
                if f.path.endswith("orders-0-0") and f.end_offset < 14
                else FileReceipt(f.path, FileStatus.ACCEPTED)
                for f in manifest.files
            ),
        )

    service.send = answer  # type: ignore[method-assign]
    loop.run_once()
    loop.run_once()
    claims = [(f.path.rsplit("/", 1)[1], f.start_offset, f.end_offset) for m in service.manifests for f in m.files]
    assert claims == [("orders-0-0", 0, 9), ("orders-0-10", 10, 14), ("orders-0-15", 15, 29), ("orders-0-0", 0, 14)]
    service.offsets = {("orders", 0): 30}
    loop.run_once()
    assert loop._holds == {}, "spans the table has passed are forgotten"


def test_paused_or_deleted_connector_reports_nothing(tmp_path: Path) -> None:
    touch(tmp_path, "orders-0-0", "orders-0-10")
    for state in ("PAUSED", "MISSING"):
        loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 20}, state=state)
        loop.run_once()
        assert service.manifests == []


def test_listing_groups_and_sorts(tmp_path: Path) -> None:
    touch(tmp_path, "a-0-100", "a-0-5", "a-1-0", "ab-0-0")
    listed = list_files(LocalLister(tmp_path), NamePattern("aiven"), ["a"])
    assert [f.start_offset for f in listed[("a", 0)]] == [5, 100] and ("ab", 0) not in listed


class ListedLister:
    """A listing of given (key, size) pairs, for :func:`list_files`."""

    def __init__(self, objects: list[tuple[str, int]]) -> None:
        self.objects = objects

    def list(self, prefix: str, start_after: str | None = None, page: int | None = None) -> Iterable[tuple[str, int]]:
        return [(k, n) for k, n in self.objects if k.startswith(prefix) and (start_after is None or k > start_after)]

    def uri(self, key: str) -> str:
        return key


@settings(max_examples=300, deadline=None)
@given(
    starts=st.lists(st.integers(0, 60), min_size=0, max_size=12, unique=True),
    committed=st.integers(0, 70),
    table_next=st.integers(0, 70),
    spans=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30)), max_size=3),
)
def test_listing_since_the_table_offset_changes_nothing_reported(
    starts: list[int], committed: int, table_next: int, spans: list[tuple[int, int]]
) -> None:
    """What the loop keeps of a listing (the last file below the table's offset, the files with
    a known span, the files above) gives the same complete files as the whole listing."""
    objects = [(f"a-0-{s}", 10) for s in starts] + [("a-1-3", 10), ("b-0-1", 10)]
    holds = {(f"a-0-{first}", 10): OffsetSpan(first, first + extra) for first, extra in spans}
    tp = TopicPartition("a", 0)
    whole = list_files(ListedLister(objects), NamePattern("aiven"), ["a"])
    kept = list_files(ListedLister(objects), NamePattern("aiven"), ["a"], {tp: table_next}, holds)
    assert set(kept) <= {tp}, "only the partitions asked for"
    assert complete_files(kept.get(tp, []), committed, table_next, holds) == complete_files(
        whole.get(tp, []), committed, table_next, holds
    )
    assert len([f for f in kept.get(tp, []) if f.start_offset < table_next and (f.key, 10) not in holds]) <= 1


class FlakySession(requests.Session):
    def __init__(self, answers: list[Any]) -> None:
        super().__init__()
        self.answers = answers
        self.calls = 0

    def request(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        resp = requests.Response()
        resp.status_code, resp._content = answer
        return resp


def test_client_retries_then_succeeds_and_never_retries_a_400() -> None:
    ok = (200, b'{"tables": [{"offsets": {"orders": {"0": 7}}}]}')
    session = FlakySession([requests.ConnectionError("down"), (503, b"{}"), ok])
    client = ServiceClient("http://svc", "tok", session, sleep=lambda s: None)
    assert client.table_offsets() == {("orders", 0): 7} and session.calls == 3
    session = FlakySession([(400, b'{"error": {}}'), ok])
    with pytest.raises(ServiceError) as err:
        ServiceClient("http://svc", "tok", session, sleep=lambda s: None).table_offsets()
    assert err.value.remote_status == 400 and not err.value.retryable and session.calls == 1
    session = FlakySession([requests.ConnectionError("down")] * 3)
    with pytest.raises(ServiceError, match="down"):
        ServiceClient("http://svc", None, session, attempts=3, sleep=lambda s: None).table_offsets()


def test_config_errors_and_env(tmp_path: Path) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text(
        "kafka: {bootstrap_servers: k:9092}\nstorage: {kind: s3, bucket: landing}\n"
        "service: {url: 'http://svc:8080', token: '${LAKEGATE_SIDECAR_TOKEN}'}\n"
        "connect: {url: 'http://127.0.0.1:8083', connectors: [snk]}\n"
    )
    env = {"LAKEGATE_SIDECAR_TOKEN": "t" * 20, "POD_IP": "10.1.2.3", "LAKEGATE_SIDECAR_POLL_INTERVAL_SECONDS": "2"}
    c = load_config(cfg, environ=env)
    assert c.service.token == "t" * 20 and c.poll_interval_seconds == 2
    cfg.write_text(cfg.read_text().replace("bucket: landing", "bucket: null"))
    with pytest.raises(SidecarConfigError, match="storage.bucket"):
        load_config(cfg, environ=env)


def test_cli_bad_config_exits_2(tmp_path: Path) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text("kafka: {bootstrap_servers: k:9092}\nstorage: {kind: nfs}\nservice: {url: x}\n")
    script = Path(sys.executable).parent / "lakegate-sidecar"
    out = subprocess.run([str(script), "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "storage.kind" in out.stderr


def test_sidecar_imports_no_spark_or_flask() -> None:
    code = "import sys, sidecar.cli, sidecar.loop\nprint([m for m in ('pyspark', 'py4j', 'flask') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_malformed_names_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    p = NamePattern("aiven")
    for _ in range(3):
        assert p.parse("orders-zero-0", 1) is None
    assert [r.message for r in caplog.records].count(
        "skipping orders-zero-0: its name does not match the naming pattern"
    ) == 1


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, None),  # not said, and not Aiven's sink: nothing to go by
        ({"connector.class": "io.aiven.kafka.connect.s3.AivenKafkaConnectS3SinkConnector"}, FileFormat.CSV),
        ({"format.output.type": "parquet"}, FileFormat.PARQUET),
        ({"format.output.type": "JSONL", "file.compression.type": "zstd"}, FileFormat.JSONL),
        ({"format.output.type": "csv"}, FileFormat.CSV),
        ({"format.output.type": "avro"}, FileFormat.AVRO),
        ({"format.output.type": "json"}, FileFormat.JSON),  # one JSON array per file
        ({"format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat"}, FileFormat.PARQUET),
        ({"format.class": "io.confluent.connect.s3.format.json.JsonFormat"}, FileFormat.JSONL),
        ({"format.class": "io.confluent.connect.s3.format.avro.AvroFormat"}, FileFormat.AVRO),
        ({"format.class": "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"}, None),
    ],
)
def test_the_output_format_comes_from_the_connector_config(config: dict[str, str], expected: FileFormat | None) -> None:
    fmt, source = output_format(config)
    assert fmt is expected and source


def test_a_csv_files_layout_is_read_from_its_connector_and_sent_with_it(tmp_path: Path) -> None:
    assert csv_layout({}) == CsvLayout(("value",), "base64")  # Aiven's defaults
    config = {"format.output.fields": "key, value,offset,timestamp", "format.output.fields.value.encoding": "NONE"}
    assert csv_layout(config) == CsvLayout(("key", "value", "offset", "timestamp"), "none")
    with pytest.raises(ProtocolError, match=r"\['size'\] are not among"):
        csv_layout({"format.output.fields": "value,size"})
    touch(tmp_path, "orders-0-0", "orders-0-10")
    layout = CsvLayout(("key", "value", "offset"), "base64")
    view = ConnectorView("csv-sink", "RUNNING", frozenset({0}), ("orders",), FileFormat.CSV, "", layout)
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 20}, view=view)
    loop.run_once()
    files = [f for m in service.manifests for f in m.files]
    assert files and all(f.csv == layout for f in files)
    assert DataFile.from_dict(files[0].to_dict()) == files[0]  # the layout goes over the wire


def test_a_confluent_connectors_layout_is_followed_from_its_config(tmp_path: Path) -> None:
    config = {
        "connector.class": "io.confluent.connect.s3.S3SinkConnector",
        "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
        "topics.dir": "archive",
        "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
        "partition.field.name": "region",
    }
    for region, start in (("eu", 0), ("us", 1), ("eu", 3), ("us", 4)):  # one partition's files, interleaved
        folder = tmp_path / "archive" / "orders" / f"region={region}"
        folder.mkdir(parents=True, exist_ok=True)
        touch(folder, f"orders+0+{start:010d}.avro")
    fmt, _ = output_format(config)
    view = ConnectorView("sink", "RUNNING", frozenset({0}), ("orders",), fmt, confluent=ConfluentLayout.of(config))
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 6}, view=view, naming="confluent")
    loop.run_once()
    files = sorted(
        (f.start_offset, f.end_offset, f.path.split("/archive/")[1]) for m in service.manifests for f in m.files
    )
    assert files == [
        (0, 0, "orders/region=eu/orders+0+0000000000.avro"),
        (1, 2, "orders/region=us/orders+0+0000000001.avro"),
        (3, 3, "orders/region=eu/orders+0+0000000003.avro"),
        (4, 5, "orders/region=us/orders+0+0000000004.avro"),
    ]
    assert all(f.format is FileFormat.AVRO for m in service.manifests for f in m.files)


def test_each_connector_reports_its_own_format_and_unusable_ones_report_nothing(tmp_path: Path) -> None:
    touch(tmp_path, "orders-0-0.gz", "orders-0-10.gz", "clicks-0-0")
    views = {
        "jsonl-sink": ConnectorView("jsonl-sink", "RUNNING", frozenset({0}), ("orders",), FileFormat.JSONL),
        "parquet-sink": ConnectorView("parquet-sink", "RUNNING", frozenset({0}), ("clicks",), FileFormat.PARQUET),
        "bytes-sink": ConnectorView(
            "bytes-sink", "RUNNING", frozenset({0}), ("logs",), None, "format.class=ByteArrayFormat"
        ),
    }

    class Groups(FakeGroups):
        def owned(self, connector: str, tasks: Iterable[int]) -> set[TopicPartition]:
            return {TopicPartition({"jsonl-sink": "orders", "parquet-sink": "clicks"}.get(connector, "logs"), 0)}

    service = FakeService()
    metrics = SidecarMetrics(60)
    settings = LoopSettings("w:8083", "sc", connectors=tuple(views), formats={"parquet-sink": FileFormat.CSV})
    loop = SidecarLoop(
        settings,
        connect=FakeConnect(views),
        groups=Groups(set(), {("orders", 0): 20, ("clicks", 0): 5}),
        lister=LocalLister(tmp_path),
        pattern=NamePattern("aiven"),
        service=service,
        metrics=metrics,
    )
    loop.run_once()
    sent = {f.topic: f.format for m in service.manifests for f in m.files}
    assert sent == {"orders": FileFormat.JSONL, "clicks": FileFormat.CSV}, "the sidecar.yaml override wins"
    assert all(c.connector != "bytes-sink" for c in service.claims)
    assert metrics.errors.labels("unsupported_format")._value.get() == 1


def test_watermarks_carry_the_services_clock_read_before_connects_offsets(tmp_path: Path) -> None:
    touch(tmp_path, "orders-0-0", "orders-0-10")
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 20})
    calls: list[str] = []
    groups = loop.groups
    assert isinstance(groups, FakeGroups)
    read_committed = groups.committed

    def committed(connector: str) -> PartitionOffsets:
        calls.append("committed")
        return read_committed(connector)

    def claim(request: LeaseRequest) -> LeaseResponse:
        calls.append("claim")
        service.claims.append(request)
        grants = tuple(LeaseGrant(t, p, True, 7) for t, p in request.partitions)
        return LeaseResponse(True, grants, now_ms=1_000 * len(service.claims))  # a clock far from the sidecar's

    groups.committed = committed  # type: ignore[method-assign]
    service.claim = claim  # type: ignore[method-assign]
    loop.run_once()
    loop.run_once()
    assert calls[:2] == ["claim", "committed"], "Connect's offsets are read after the service stamped its answer"
    [mark] = service.claims[-1].watermarks
    assert (mark.connect_offset, mark.read_at_ms) == (20, 1_000), "stamped with the first answer's service time"


def test_a_log_end_no_claim_carried_is_read_again(tmp_path: Path) -> None:
    """A round that read a partition's log end but made no watermark for it (Connect's group had
    no committed offset for it yet) reads it again next round, at a later time."""
    clock = [0.0]
    loop, service = make_loop(tmp_path, {("orders", 0)}, {}, clock=clock)
    groups = loop.groups
    assert isinstance(groups, FakeGroups)
    groups.ends = {("orders", 0): 5}
    service.due[("orders", 0)] = 1_000
    service.now_ms = 2_000
    loop.run_once()
    groups.committed_map = {("orders", 0): 5}
    clock[0], service.now_ms = 0.25, 2_250
    loop.run_once()
    assert len(groups.end_reads) == 2, "read again: the first read went with no watermark"
    clock[0], service.now_ms = 0.5, 2_500
    loop.run_once()
    assert [w.log_end for w in service.claims[-1].watermarks] == [5]
    assert len(groups.end_reads) == 2 and loop.next_round_at(0.5) == 5.5, "carried and reached: settled"


def test_thousands_of_partitions_are_claimed_in_requests_the_service_accepts(tmp_path: Path) -> None:
    """A claim of 10,000 partitions with their watermarks was larger than the service's 1 MiB
    request limit (413 every round): claims go in batches, every partition in one, each
    watermark once, each request well under the limit even with long topic names."""
    topic = "t" * 200
    owned = {(topic, p) for p in range(4_500)}
    loop, service = make_loop(tmp_path, owned, {tp: 5 for tp in owned})
    loop.run_once()
    first = len(service.claims)
    report = loop.run_once()  # now with a watermark per partition
    batches = service.claims[first:]
    assert len(batches) > 1 and len(report.partitions) == 4_500
    assert sorted(tp for c in batches for tp in c.partitions) == sorted(TopicPartition(*tp) for tp in owned)
    assert sorted(w.tp for c in batches for w in c.watermarks) == sorted(TopicPartition(*tp) for tp in owned)
    sizes = [len(json.dumps(c.to_dict()).encode()) for c in batches]
    assert max(sizes) < 1 << 20, sizes


def test_a_watermark_carries_the_first_file_while_the_table_has_no_offset(tmp_path: Path) -> None:
    """The service decides where a partition's ledger begins from the bucket's first file of it
    (retention removed 0..499 before the connector started): the watermark carries it until the
    table has an offset of the partition; with no file below Connect's offset, that offset."""
    touch(tmp_path, "orders-0-500", "orders-0-600", "orders-1-900")
    owned = {("orders", 0), ("orders", 1), ("orders", 2)}
    loop, service = make_loop(tmp_path, owned, {("orders", 0): 700, ("orders", 1): 800, ("orders", 2): 300})
    loop.run_once()
    loop.run_once()
    marks = {w.tp: w.first_file for w in service.claims[-1].watermarks}
    assert marks == {("orders", 0): 500, ("orders", 1): 800, ("orders", 2): 300}
    service.offsets = {("orders", 0): 700}
    loop.run_once()
    loop.run_once()
    marks = {w.tp: w.first_file for w in service.claims[-1].watermarks}
    assert marks[("orders", 0)] is None, "the table has its offset: nothing to decide"


def test_a_task_failing_after_the_start_is_reported_once_and_its_recovery_too(tmp_path: Path) -> None:
    """The doctor's connector_state was read only at the sidecar's start: a task that failed later
    showed nowhere. Each round compares the connector's state and failed tasks with the last seen."""
    clock = [0.0]
    loop, _ = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 0}, clock=clock)
    reported: list[list[str]] = []
    loop.on_health_change = reported.append
    connect = loop.connect
    assert isinstance(connect, FakeConnect)
    loop.run_once()
    assert reported == [], "running as at the preflight: nothing to report"
    running = connect.known["snk"]
    connect.known["snk"] = replace(running, my_tasks=frozenset(), failed_tasks=(0,))
    loop.run_once()
    loop.run_once()
    assert reported == [["snk"]], "reported once, when it changed"
    connect.known["snk"] = running
    loop.run_once()
    assert reported == [["snk"], ["snk"]], "and again when it runs again"

    def unreachable(names: list[str]) -> None:
        raise RuntimeError("service down")

    loop.on_health_change = unreachable
    connect.known["snk"] = replace(running, state="PAUSED", my_tasks=frozenset())
    loop.run_once()  # logged, not raised
    loop.on_health_change = reported.append
    loop.run_once()
    assert reported == [["snk"], ["snk"]], "not again at once: the service may be restarting"
    clock[0] += 31
    loop.run_once()
    assert reported[-1] == ["snk"] and len(reported) == 3, "a report that failed is made again later"


def test_a_caught_up_partition_costs_no_listing(tmp_path: Path) -> None:
    """Connect's committed offset at or below what the service holds: no complete file can be
    new, so the partition is not listed (an idle archive costs nothing per round)."""
    touch(tmp_path, "orders-0-0", "orders-1-0", "orders-1-10")
    owned = {("orders", 0), ("orders", 1), ("orders", 2)}
    loop, service = make_loop(tmp_path, owned, {("orders", 0): 20, ("orders", 1): 30, ("orders", 2): 5})
    service.offsets = {("orders", 0): 20, ("orders", 1): 10}  # orders-2: no offset in the table yet
    asked: list[set[TopicPartition]] = []
    files = loop._listing.files

    def spy(lister: Any, since: Any, spans: Any = (), upto: Any = None) -> Any:
        asked.append(set(since))
        return files(lister, since, spans, upto)

    loop._listing.files = spy  # type: ignore[method-assign]
    report = loop.run_once()
    assert asked == [{TopicPartition("orders", 1), TopicPartition("orders", 2)}]
    assert [c.file.key for c in report.sent] == ["orders-1-10"]


def test_an_archive_is_sent_a_window_at_a_time_each_file_once_with_its_range(tmp_path: Path) -> None:
    """500 files of a partition Connect has committed whole: a round sends the listing window's
    files and claims only up to where the window stopped (the last file's end is the next file's
    start, not Connect's offset); later rounds list from what the service holds, and every file
    goes once, with the range it holds."""
    touch(tmp_path, *(f"orders-0-{i * 10:020d}" for i in range(500)))
    clock = [0.0]
    loop, service = make_loop(tmp_path, {("orders", 0)}, {("orders", 0): 5_000}, clock=clock)
    sent: list[tuple[int, int]] = []

    def round_at(t: float) -> int:
        clock[0] = t
        before = len(service.manifests)
        loop.run_once()
        for m in service.manifests[before:]:
            sent.extend((f.start_offset, f.end_offset) for f in m.files)
        return loop._watermarks[TopicPartition("orders", 0)].connect_offset

    assert round_at(0) == WINDOW * 10, "the round goes as far as its window: the next file's start"
    assert sent == [(i * 10, i * 10 + 9) for i in range(WINDOW)]
    assert loop._watermarks[TopicPartition("orders", 0)].first_file == 0
    service.held[("orders", 0)] = WINDOW * 10  # buffered; the table has no offset yet
    assert round_at(31) == 2 * WINDOW * 10, "listed from what the service holds: the next window"
    assert loop._watermarks[TopicPartition("orders", 0)].first_file == 0, "the first file, as first listed"
    assert len(sent) == 2 * WINDOW, "nothing sent twice"
    service.offsets[("orders", 0)] = 1_000  # a first commit
    service.held[("orders", 0)] = 2 * WINDOW * 10
    assert round_at(62) == 5_000, "the last window reaches Connect's offset"
    assert loop._watermarks[TopicPartition("orders", 0)].first_file is None and not loop._first_seen
    assert sent == [(i * 10, i * 10 + 9) for i in range(500)], "every file once, with its range"
