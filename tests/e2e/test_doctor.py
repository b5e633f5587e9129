"""The doctor on real connectors: a right one passes, each misconfiguration is flagged, a sidecar
with ``preflight: require`` refuses to start beside a wrong one, and a topic made again under a
table is caught.

Real Kafka (a topic kept 60 s, a topic written in transactions, a topic no table takes), a real
Connect worker running the S3 sink three ways, the S3 server, a sidecar, and the service with
Delta tables. ``lakegate-doctor`` runs as a user runs it: against the service alone (the
connectors the sidecars reported) and reading the worker's REST API itself (``--connect``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType

from lakegate_stack import s3 as s3mod
from lakegate_stack.connect import ConnectWorker, s3_sink_config
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server
from lakegate_stack.services import (
    ADMIN_TOKEN,
    READ_TOKEN,
    SIDECAR_TOKEN,
    ServiceProcess,
    SidecarProcess,
    sidecar_config,
)
from tests.kafka_helpers import create_topic, make_again
from tests.pipeline_helpers import FIELDS, S3_ENV, produce, wait_committed

BUCKET = "lake-doctor"
GOOD, SHORT, TXN, STRAY, USERS = "doc-good", "doc-short", "doc-txn", "doc-stray", "doc-users"
WRONG = {"offset_field", "errors_tolerance", "isolation_level", "retention", "routing", "placement"}
WRONG |= {"upsert_fields", "key_converter"}  # the upsert table it feeds: no key or offset field, keys as bytes
SCRIPTS = Path(sys.executable).parent


def sink(topics: list[str], s3_server: S3Server, **settings: Any) -> dict[str, str]:
    prefix = settings.pop("prefix", None)
    return s3_sink_config(
        topics, BUCKET, s3_server.endpoint, s3mod.ACCESS_KEY, s3mod.SECRET_KEY, prefix=prefix, output="jsonl", tasks=1,
        **settings,
    )  # fmt: skip


def doctor(service: ServiceProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(SCRIPTS / "lakegate-doctor"), "--service", service.url, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def blocking(report: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {c["name"]: set() for c in report["connectors"]}
    for f in report["findings"]:
        if f["severity"] == "blocking":
            out[f["connector"]].add(f["check"])
    return out


def write_in_transactions(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="lakegate-doctor-test", acks="all")
    try:
        producer.init_transactions()
        for batch in range(2):
            producer.begin_transaction()
            for i in range(5):
                producer.send(topic, key=f"k{i}".encode(), value=json.dumps({"batch": batch, "i": i}).encode())
            producer.commit_transaction()
    finally:
        producer.close()


def keep_for(bootstrap: str, topic: str, ms: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": str(ms)})])
    finally:
        admin.close()


def test_the_doctor_passes_a_right_connector_and_flags_each_wrong_one(
    tmp_path: Path, kafka_broker: KafkaBroker, connect_worker: ConnectWorker, s3_server: S3Server
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    for topic, partitions in ((GOOD, 2), (SHORT, 1), (TXN, 1), (STRAY, 1), (USERS, 1)):
        create_topic(bootstrap, topic, partitions)
    keep_for(bootstrap, SHORT, 60_000)  # a minute: less than a round may take (2 + 30 + 600 s)
    write_in_transactions(bootstrap, TXN)
    s3_server.create_bucket(BUCKET)
    lake = tmp_path / "lake"
    tables = [
        {"name": name, "path": str(lake / name), "topics": [topic], "commit": {"interval_seconds": 2}}
        for name, topic in (("doc_good", GOOD), ("doc_short", SHORT), ("doc_txn", TXN))
    ]
    upsert = {"mode": "upsert", "key": ["id"], "delete_on_tombstone": True}
    tables.append({"name": "doc_users", "path": str(lake / "doc_users"), "topics": [USERS], **upsert})
    s3 = {"endpoint": s3_server.endpoint, "access_key": s3mod.ACCESS_KEY, "secret_key": s3mod.SECRET_KEY}
    roots = [lake.as_uri() + "/", f"s3a://{BUCKET}/landing/"]
    service = ServiceProcess(tmp_path, tables, roots, s3=s3, kafka=bootstrap).start()
    client = connect_worker.client()
    connectors = {
        "doc-right": sink([GOOD], s3_server, prefix="landing/right/", **{"format.output.fields": FIELDS}),
        "doc-wrong": sink(
            [SHORT, TXN, STRAY, USERS],
            s3_server,
            prefix="elsewhere/",  # outside storage.allowed_roots
            **{
                "format.output.fields": "value,timestamp",
                "errors.tolerance": "all",
                "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            },
        ),
        "doc-misnamed": sink(
            [GOOD],
            s3_server,
            **{
                "format.output.fields": FIELDS,
                "file.name.template": "landing/misnamed/{{topic}}/{{partition}}/{{start_offset}}",
            },
        ),  # fmt: skip
    }
    sidecar = None
    try:
        for name, config in connectors.items():
            client.put_connector(name, config)
            client.wait_running(name, tasks=1)

        # a sidecar that requires exactly once refuses to start beside the wrong connector
        elsewhere = {"kind": "s3", "bucket": BUCKET, "prefix": "elsewhere/", "endpoint": s3_server.endpoint}
        wrong = sidecar_config(connect_worker, ["doc-wrong"], bootstrap, elsewhere, service.url)
        path = tmp_path / "sidecar-wrong.yaml"
        path.write_text(yaml.safe_dump({**wrong, "id": "sidecar-wrong", "preflight": "require"}))
        refused = subprocess.run(
            [str(SCRIPTS / "lakegate-sidecar"), "--config", str(path)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **S3_ENV, "LAKEGATE_SIDECAR_TOKEN": SIDECAR_TOKEN},
        )
        assert refused.returncode == 3, refused.stdout + refused.stderr
        for check in sorted(WRONG):
            assert check in refused.stderr, (check, refused.stderr)

        # ... and starts beside the right one, which it reports for GET /v1/doctor
        landing = {"kind": "s3", "bucket": BUCKET, "prefix": "landing/right/", "endpoint": s3_server.endpoint}
        right = {
            **sidecar_config(connect_worker, ["doc-right"], bootstrap, landing, service.url),
            "preflight": "require",
        }
        sidecar = SidecarProcess(tmp_path, "sidecar-right", right, env=S3_ENV).start()
        produce(bootstrap, GOOD, [(i % 2, f"k{i}", {"i": i}) for i in range(20)])
        wait_committed(service, bootstrap, [GOOD], ["doc_good"], 2)
        reported = service.call("GET", "/v1/doctor", READ_TOKEN)
        assert reported.status_code == 200, reported.text
        report = reported.json()
        assert [(c["name"], c["tables"], c["source"]) for c in report["connectors"]] == [
            ("doc-right", ["doc_good"], "sidecar sidecar-right"),
            (
                "doc-wrong",
                ["doc_short", "doc_txn", "doc_users"],
                "sidecar sidecar-wrong",
            ),  # the refused one's report is kept
        ]
        noted = [f for f in report["findings"] if f["connector"] == "doc-right" and f["severity"] != "info"]
        assert not report["ok"] and noted == [], report["findings"]
        panel = service.call("GET", "/status/panel", READ_TOKEN).text  # the status page: each one's last check
        assert 'data-connector="doc-right" data-doctor="ok"' in panel, panel
        assert 'data-connector="doc-wrong" data-doctor="blocked"' in panel, panel
        ran = doctor(service, "--token", READ_TOKEN, "--require", "exactly-once", "--connector", "doc-right")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "doc-right -> doc_good: OK" in ran.stdout and "doc-wrong" not in ran.stdout
        ran = doctor(service, "--token", READ_TOKEN, "--require", "exactly-once")
        assert ran.returncode == 1 and "doc-wrong -> doc_short, doc_txn, doc_users: BLOCKED" in ran.stdout, ran.stdout

        # every connector of the worker, read by the CLI from Connect's REST API
        ran = doctor(
            service, "--token", ADMIN_TOKEN, "--connect", connect_worker.url, "--require", "exactly-once", "--json"
        )
        assert ran.returncode == 1, ran.stdout + ran.stderr
        found = blocking(json.loads(ran.stdout))
        assert found == {
            "doc-right": set(),
            "doc-wrong": WRONG,
            "doc-misnamed": {"file_naming"},
        }, found
        secrets = ran.stdout + json.dumps(service.call("GET", "/v1/doctor", READ_TOKEN).json())
        assert s3mod.SECRET_KEY not in secrets  # only the keys the doctor reads leave Connect
        ran = doctor(service, "--token", READ_TOKEN, "--connect", connect_worker.url)
        assert ran.returncode == 2 and "403" in ran.stderr, ran.stderr  # a viewer may not POST

        # the topic made again under the table: new records at old offsets would be dropped as duplicates
        sidecar.stop()
        sidecar = None
        for name in connectors:
            client.delete_connector(name)
        make_again(bootstrap, GOOD, 2)
        report = service.call("GET", "/v1/doctor", READ_TOKEN).json()
        backwards = [f for f in report["findings"] if f["check"] == "offsets_backwards"]
        assert not report["ok"] and {f["severity"] for f in backwards} == {"blocking"}, report["findings"]
        assert sorted(f["message"].split()[0] for f in backwards) == [f"{GOOD}-0", f"{GOOD}-1"], backwards
    finally:
        if sidecar is not None:
            sidecar.stop()
        for name in connectors:
            try:
                client.delete_connector(name)
            except Exception:  # already gone
                pass
        service.stop()
