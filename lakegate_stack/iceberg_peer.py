"""Apache Iceberg's own Kafka Connect sink, run in the local stack as the peer Lakegate is measured
against (``scripts/bench --parts iceberg-peer``, ``tests/integration/test_iceberg_peer.py``).

The sink is assembled from Maven Central as the Connect plugin ``iceberg-sink``
(:mod:`lakegate_stack.artifacts`, ``scripts/fetch-jars iceberg-sink``) and runs on a
:class:`~lakegate_stack.connect.ConnectWorker` made with ``plugins=(..., PEER_PLUGIN_GROUP)``.
It writes Parquet data files itself and commits them through its coordinator (a task of the
connector's, elected inside the worker group) with a control topic, into a table of the same
REST catalog and S3 server as Lakegate's Iceberg tables.

:func:`peer_sink_config` is the connector configuration as Iceberg's Kafka Connect page gives it:
the table list, auto-create and schema evolution on (what a schemaless JSON topic needs), the
control topic, the commit interval, and the REST catalog properties with ``S3FileIO`` (the FileIO
its runtime distribution ships for S3) on the stack's S3 server. Nothing its documentation does not
describe is tuned.
"""

from __future__ import annotations

import requests

from lakegate_stack import s3 as s3mod
from lakegate_stack.errors import StackError
from lakegate_stack.kafka import create_topic

PEER_PLUGIN_GROUP = "iceberg-sink"
PEER_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"
# The snapshot summary key prefix under which the peer's coordinator records its control topic's offsets.
PEER_OFFSETS_PREFIX = "kafka.connect.offsets."


def create_control_topic(bootstrap: str, topic: str) -> None:
    """The control topic the peer's workers and coordinator talk over: one partition, made ahead
    (the sink expects it to exist, as its documentation's set-up does)."""
    create_topic(bootstrap, topic, 1)


def create_namespace(catalog_uri: str, namespace: str) -> None:
    """Make ``namespace`` in the REST catalog ahead of the sink (an operator's set-up step). The
    sink's tasks each create a missing namespace on their first record; two at once meet a
    unique-key error in the local catalog server's sqlite backend, which it answers with a 500
    (not the 409 a catalog gives for "already exists"), and the sink kills the task."""
    response = requests.post(f"{catalog_uri}/v1/namespaces", json={"namespace": [namespace]}, timeout=30)
    if response.status_code not in (200, 409):
        raise StackError(
            f"creating namespace {namespace} at {catalog_uri}: HTTP {response.status_code}: {response.text}"
        )


def peer_sink_config(
    topics: list[str],
    table: str,
    catalog_uri: str,
    s3_endpoint: str,
    *,
    control_topic: str,
    commit_interval_ms: int,
    tasks: int = 2,
    **overrides: str,
) -> dict[str, str]:
    """The Iceberg sink's connector config: schemaless JSON values of ``topics`` into ``table``
    (``namespace.table``, created on the first commit), committed every ``commit_interval_ms``."""
    return {
        "connector.class": PEER_CLASS,
        "topics": ",".join(topics),
        "tasks.max": str(tasks),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "iceberg.tables": table,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.evolve-schema-enabled": "true",
        "iceberg.control.topic": control_topic,
        "iceberg.control.commit.interval-ms": str(commit_interval_ms),
        "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": catalog_uri,
        "iceberg.catalog.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "iceberg.catalog.s3.endpoint": s3_endpoint,
        "iceberg.catalog.s3.path-style-access": "true",
        "iceberg.catalog.s3.access-key-id": s3mod.ACCESS_KEY,
        "iceberg.catalog.s3.secret-access-key": s3mod.SECRET_KEY,
        "iceberg.catalog.client.region": s3mod.REGION,
        **overrides,
    }
