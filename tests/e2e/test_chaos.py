"""The short chaos run CI makes on every change: 50,000 records and 10 faults of 10 kinds (fixed
seed) on the real stack, then every id exactly once in both append tables, a Delta one (delta-rs
and delta-spark) and an Iceberg one in a REST catalog (pyiceberg and Spark), the upsert table at
each key's last change (12,500 changes of 500 keys), each partition's offset in its table (the
Delta ``txn``, the Iceberg snapshot's ``lakegate.offsets``) equal to Connect's committed offset,
nothing from outside the roots.

The harness and the fault kinds are ``lakegate_stack.chaos`` (``scripts/chaos`` runs longer ones).
Seed 26 draws every kind but the two that only wait out a fixed outage (``service_unreachable``,
``slow_s3``); both crash points inside a commit, the sink re-write (an orphan) and the zombie
sidecar are in. Faults fall on producer progress, so a slower machine only makes the run longer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from lakegate_stack.chaos import FAULT_KINDS, UPSERT_KEYS, ChaosRun, ChaosSettings, summary
from lakegate_stack.chaos.settings import UPSERT_TABLE
from lakegate_stack.kafka import KafkaBroker
from lakegate_stack.s3 import S3Server

logger = logging.getLogger(__name__)

SEED, RECORDS, FAULTS = 26, 50_000, 10


def test_a_short_chaos_run_loses_and_duplicates_nothing(
    tmp_path: Path, kafka_broker: KafkaBroker, s3_server: S3Server, spark: Any
) -> None:
    settings = ChaosSettings(seed=SEED, records=RECORDS, faults=FAULTS)
    report = ChaosRun(
        settings, tmp_path, kafka=kafka_broker, s3=s3_server, spark_check=lambda t: t.spark_ids(spark)
    ).run()
    text = json.dumps(report.to_json(), indent=2, default=str)
    (tmp_path / "chaos-report.json").write_text(text)
    logger.info("%s", summary(report))

    assert report.records_produced == RECORDS
    assert report.lost == 0 and report.duplicated == 0, text
    assert report.records_in_table == RECORDS, text
    assert report.txn_mismatches == [] and report.outside_roots == [], text
    assert report.upsert_keys == UPSERT_KEYS and report.upsert_mismatches == [], text
    assert report.spark_checked and report.spark_mismatches == [], text
    assert sum(report.faults_by_kind.values()) == FAULTS
    assert set(report.faults_by_kind) == set(FAULT_KINDS) - {"service_unreachable", "slow_s3"}
    assert report.orphans_made >= 1, "the sink re-write fault made no orphan"
    assert report.recovery_s_all, "no service restart was timed"
    # the service's own audit agrees: every table's ledger holds, and every record read back from
    # Kafka equals its row (the upsert table: its still-current records)
    assert len(report.audits) == 3, report.audits
    for table, audit in report.audits.items():
        assert audit["ok"] and not [f for f in audit["findings"] if not f.startswith("gap ")], (table, audit)
        assert audit["sampled"] > 0, (table, audit)
    appends = [a for t, a in report.audits.items() if t != UPSERT_TABLE]
    assert appends and all(a["matched"] == a["sampled"] for a in appends), report.audits
