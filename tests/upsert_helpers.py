"""Upsert and CDC test data, for both table formats' upsert tests: sink files of change records
written as the S3 sink writes them (``format.output.fields=key,value,offset``), and the models
(one row per live key, its latest value) each table is compared with."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from commit_service.domain.plan import PendingFile
from lakegate_core.protocol import DataFile, FileFormat

Record = dict[str, Any]  # one Kafka record as the sink's envelope: key, value, offset


class Landing:
    """Writes a partition's records as sink files, one file per call, offsets running on."""

    def __init__(self, root: Path, topic: str) -> None:
        self.root, self.topic = root, topic
        self.next: dict[int, int] = {}

    def write(
        self, partition: int, records: list[tuple[Any, Any]], fmt: FileFormat, key_text: bool = False
    ) -> tuple[PendingFile, list[Record]]:
        """``key_text``: each key written as its JSON text, as the sink's Parquet output writes a
        schemaless (JsonConverter) key."""
        start = self.next.get(partition, 0)
        envelopes = [{"key": k, "value": v, "offset": start + i} for i, (k, v) in enumerate(records)]
        written = [{**e, "key": json.dumps(e["key"])} for e in envelopes] if key_text else envelopes
        self.next[partition] = start + len(records)
        path = self.root / "landing" / f"{self.topic}-{partition}-{start}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt is FileFormat.JSONL:
            path.write_text("".join(json.dumps(e) + "\n" for e in written))
        else:
            pq.write_table(pa.Table.from_pylist(written), path)
        f = DataFile(f"file://{path}", self.topic, partition, start, start + len(records) - 1, path.stat().st_size, fmt)
        return PendingFile(f, f"m-{partition}-{start}", "sc-1"), envelopes


def upsert_model(records: list[Record], tombstones_delete: bool) -> dict[int, dict[str, Any]]:
    """One row per live key, latest value: records applied in offset order per partition (each key
    lives in one partition, as Kafka's default partitioner puts it)."""
    model: dict[int, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: r["offset"]):
        if r["value"] is None:
            if tombstones_delete:
                model.pop(r["key"]["id"], None)
        else:
            model[r["value"]["id"]] = r["value"]
    return model


def debezium_model(records: list[Record]) -> dict[int, dict[str, Any]]:
    model: dict[int, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: r["offset"]):
        v = r["value"]
        if v is None:
            continue  # Debezium's tombstone after a delete: compaction's, not a change
        if v["op"] == "d":
            model.pop(v["before"]["id"], None)
        else:
            model[v["after"]["id"]] = v["after"]
    return model


def debezium_round(rng: random.Random, live: dict[int, dict[str, Any]], round_no: int) -> list[tuple[Any, Any]]:
    """60 Debezium change records over 25 keys (creates, updates, deletes each followed by the
    tombstone Debezium sends), applied to ``live`` (key -> row) as they are made."""
    records: list[tuple[Any, Any]] = []
    for _ in range(60):
        key = rng.randrange(25)
        source = {"lsn": rng.randrange(10**9), "table": "users"}
        if key in live and rng.random() < 0.3:
            records.append(({"id": key}, {"before": live.pop(key), "after": None, "op": "d", "source": source}))
            records.append(({"id": key}, None))  # the tombstone Debezium sends after a delete
        else:
            after = {"id": key, "email": f"u{key}@r{round_no}.example", "score": rng.randrange(100)}
            op = "u" if key in live else ("r" if round_no == 0 else "c")
            records.append(({"id": key}, {"before": live.get(key), "after": after, "op": op, "source": source}))
            live[key] = after
    return records


def upserts_and_tombstones(rng: random.Random, partition: int, round_no: int) -> list[tuple[Any, Any]]:
    """40 records of one partition of two (even keys in partition 0, odd in 1): a fifth
    tombstones, the rest new values."""
    records: list[tuple[Any, Any]] = []
    for _ in range(40):
        key = rng.randrange(30) * 2 + partition
        if rng.random() < 0.2:
            records.append(({"id": key}, None))
        else:
            records.append(({"id": key}, {"id": key, "name": f"r{round_no}-{rng.randrange(1000)}"}))
    return records
