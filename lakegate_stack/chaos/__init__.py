"""The chaos run: the real pipeline under seeded faults, checked for exactly-once at quiesce.

Used by ``scripts/chaos`` (the command) and ``tests/e2e/test_chaos.py`` (a short fixed-seed run in
CI). The stack is all real: Kafka, three Kafka Connect workers in one group running three S3 sink
connectors (the stand-in for Aiven's sink: ``chaos-parquet`` writes Parquet, ``chaos-jsonl`` and
``chaos-upsert`` gzip JSON lines, all with the ``offset`` field), the S3 server, one
``lakegate-sidecar`` per worker and the ``lakegate-service`` with fencing on. Three topics of six
partitions route to three tables: a Delta append table, an Iceberg append table (``chaos.b``, in
Apache Iceberg's REST catalog server, its warehouse on the S3 server) and a Delta ``mode: upsert``
table (key ``id``, deletion vectors). Three :class:`~lakegate_stack.proxy.FaultProxy` sit in the way: sidecars
-> service, everyone -> S3, and everyone -> the REST catalog.

With ``peer`` set (``scripts/chaos --peer``), the same workers also run Apache Iceberg's own Kafka
Connect sink (:mod:`lakegate_stack.iceberg_peer`) on topics a and b into ``peer.ab`` of the same
catalog, at the same commit interval; the faults hit both pipelines at once (the worker faults
pick the worker running the peer's commit coordinator), and the report says what each lost and
duplicated (``peer``).

A producer thread writes ``records`` records with unique ids at a paced rate (every
:data:`UPSERT_EVERY`-th one also changes one of :data:`UPSERT_KEYS` keys of the upsert topic) and
stops at each fault's *gate* (a record count drawn from the seed) until the fault is injected:
where a fault falls is decided by progress, never by racing the producer. Each fault then waits
for an observed outcome (the service process died at its crash point, the tasks moved, the sink
logged its split) within a bounded deadline, and recovers. At the end every fault is undone, the
harness waits for every table to hold Kafka's log end, and checks, with delta-rs or pyiceberg and
(when given) Spark:

- every produced id is in its append table exactly once (``lost``, ``duplicated``);
- the upsert table holds one row per key, at the key's last change (``upsert_mismatches``);
- each partition's offset in its table (a Delta ``txn`` version, the Iceberg head snapshot's
  ``lakegate.offsets``) equals the ``connect-<connector>`` group's committed offset;
- every file the tables reference lies under the table's root (nothing from outside the roots).

The report (:class:`ChaosReport`) is JSON: records, loss, duplicates, the upsert table's
mismatches, faults by kind, commits, duration, the seed, and ``recovery_s`` (SIGKILL of the
service to ready again).

The package: ``settings`` (what a run is made of), ``producer``, ``faults`` (the registry of fault
kinds, one function each), ``rogue`` (the rogue client), ``run`` (the run), ``verify`` (quiesce and
the checks), ``report``; the TCP fault proxy is ``lakegate_stack.proxy``.
"""

from lakegate_stack.chaos.faults import FAULTS
from lakegate_stack.chaos.producer import upsert_key, upsert_model
from lakegate_stack.chaos.report import ChaosReport, FaultRecord, summary, upsert_mismatches_of
from lakegate_stack.chaos.run import ChaosRun
from lakegate_stack.chaos.settings import (
    ALL_FAULT_KINDS,
    FAULT_KINDS,
    PEER_FAULT_KINDS,
    UPSERT_EVERY,
    UPSERT_KEYS,
    ChaosError,
    ChaosSettings,
)

__all__ = [
    "ALL_FAULT_KINDS",
    "FAULTS",
    "FAULT_KINDS",
    "PEER_FAULT_KINDS",
    "UPSERT_EVERY",
    "UPSERT_KEYS",
    "ChaosError",
    "ChaosReport",
    "ChaosRun",
    "ChaosSettings",
    "FaultRecord",
    "summary",
    "upsert_key",
    "upsert_mismatches_of",
    "upsert_model",
]
