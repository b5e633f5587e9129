"""Service config: YAML + env overrides + ${VAR}, validation messages naming the key; paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from commit_service.config import Role, embedded_default, load_config
from commit_service.domain.paths import UnsafePathError, is_under, normalize_uri, table_location
from commit_service.domain.plan import OnTimeout
from commit_service.errors import ConfigError

SAMPLE = """
server: {host: 0.0.0.0, port: 8080, threads: 8, max_request_bytes: 1048576}
auth:
  enabled: true
  tokens:
    - {token: "${LAKEGATE_SIDECAR_TOKEN}", role: sidecar}
    - {token: "${LAKEGATE_ADMIN_TOKEN}", role: admin}
storage:
  allowed_roots: ["s3a://landing/", "file:///var/lib/lakegate/data/"]
  s3: {endpoint: null, region: us-east-1, path_style: true}
spark: {master: "local[*]", ui_port: 4040, conf: {spark.sql.shuffle.partitions: 8}}
tables:
  - name: orders
    path: s3a://lake/orders
    topics: [orders]
    partition_by: []
    placement: copy_into_table
    commit: {interval_seconds: 10, max_files: 1000, max_bytes: 1073741824, timeout_seconds: 30, on_timeout: partial}
"""
ENV = {"LAKEGATE_SIDECAR_TOKEN": "s" * 20, "LAKEGATE_ADMIN_TOKEN": "a" * 20}


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "service.yaml"
    p.write_text(text)
    return p


def test_design_sample_loads(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, SAMPLE), environ=ENV)
    assert [t.role for t in cfg.auth.tokens] == [Role.SIDECAR, Role.ADMIN]
    assert cfg.auth.tokens[0].token == "s" * 20
    assert cfg.tables[0].commit.on_timeout is OnTimeout.PARTIAL
    assert cfg.spark.conf == {"spark.sql.shuffle.partitions": "8"}
    assert cfg.table_for("orders") is cfg.tables[0] and cfg.table_for("payments") is None


def test_env_overrides_keys_and_list_items(tmp_path: Path) -> None:
    env = {
        **ENV,
        "LAKEGATE_SERVER__PORT": "8081",
        "LAKEGATE_TABLES__0__COMMIT__MAX_FILES": "5",
        "LAKEGATE_CACHE_DIR": "/not/a/config/key",
    }
    cfg = load_config(write(tmp_path, SAMPLE), environ=env)
    assert cfg.server.port == 8081
    assert cfg.tables[0].commit.max_files == 5


@pytest.mark.parametrize(
    ("text_change", "env", "message"),
    [
        (("port: 8080", "port: 80800"), {}, "server.port"),
        (("port: 8080", "prot: 8080"), {}, "server.prot: unknown key"),
        (("threads: 8", "threads: eight"), {}, "server.threads: must be an integer"),
        (("on_timeout: partial", "on_timeout: later"), {}, "tables.commit.on_timeout: must be one of"),
        (("topics: [orders]", "topics_regex: '(('"), {}, "topics_regex"),
        (("topics: [orders]", "topics: [orders]\n    topics_regex: o.*"), {}, "exactly one of topics"),
        (('"s3a://landing/"', '"http://landing/"'), {}, "storage.allowed_roots"),
        (("enabled: true", "enabled: yes please"), {}, "auth.enabled: must be true or false"),
        (
            ("partition_by: []", "partition_by: ['day(3, ts)']"),
            {},
            "partition_by: 'day(3, ts)': day takes the column alone",
        ),
        (("partition_by: []", "partition_by: ['bucket(id)']"), {}, "bucket takes a positive width first"),
        (("partition_by: []", "partition_by: ['hour(ts)', 'day(ts)']"), {}, "keep the finest one"),
        (("partition_by: []", "partition_by: ['week(ts)']"), {}, "no transform 'week'"),
        (("placement: copy_into_table", "placement: in_place"), {}, "no storage.allowed_roots reaches into it"),
        (("placement: copy_into_table", "placement: nearby"), {}, "tables.placement: must be one of"),
        (("placement: copy_into_table", "unwrap: always"), {}, "tables.unwrap: must be one of"),
        (("path: s3a://lake/orders", "path: ftp://lake/orders"), {}, "tables[orders].path"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text_change: tuple[str, str], env: dict[str, str], message: str) -> None:
    text = SAMPLE.replace(*text_change)
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text), environ={**ENV, **env})
    assert message.replace("tables.", "tables[0].") in str(err.value) or message in str(err.value)


def test_unset_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="LAKEGATE_ADMIN_TOKEN is not set"):
        load_config(write(tmp_path, SAMPLE), environ={"LAKEGATE_SIDECAR_TOKEN": "s" * 20})


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml", environ={})
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(write(tmp_path, "server: [unclosed"), environ={})


def test_embedded_default_is_local_and_open(tmp_path: Path) -> None:
    cfg = load_config(None, environ={})
    assert cfg.auth.enabled is False
    assert cfg.table_for("anything") is not None
    d = embedded_default(tmp_path)
    assert d["tables"][0]["path"].startswith(str(tmp_path.resolve()))


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("s3://landing/orders-0-0", "s3a://landing/orders-0-0"),
        ("/a/%2e%2e/b", "file:///a/%252e%252e/b"),  # a bare path is literal: '%2e%2e' is a name
        ("/var/data/f", "file:///var/data/f"),
        ("file:///var/data/f", "file:///var/data/f"),
    ],
)
def test_normalize(raw: str, norm: str) -> None:
    assert normalize_uri(raw) == norm


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "relative/path",
        "http://x/y",
        "s3a://landing/../etc",
        "file:///a/../../etc/passwd",
        "file://otherhost/x",
        "s3a://bucket",
        "hdfs://nn/x",
        "s3a://b/k?x=1",
        "file:///a/%2e%2e/b",
        "s3a://landing/a//b",
    ],
)
def test_unsafe_paths_refused(bad: str) -> None:
    with pytest.raises(UnsafePathError):
        normalize_uri(bad)


def test_is_under_roots() -> None:
    roots = ["s3a://landing/", "file:///var/lib/lakegate/data/"]
    assert is_under("s3a://landing/orders-0-0", roots)
    assert not is_under("s3a://landing2/orders-0-0", roots)
    assert not is_under("s3a://landing/", roots)
    assert is_under(normalize_uri("s3://landing/x"), roots)
    assert not is_under("file:///var/lib/lakegate/database", roots)
    assert table_location("/tmp/t") == "/tmp/t" and table_location("s3://lake/t") == "s3a://lake/t"


def test_placement_in_place_needs_a_root_reaching_into_the_table(tmp_path: Path) -> None:
    inside = SAMPLE.replace("placement: copy_into_table", "placement: in_place").replace(
        '"s3a://landing/"', '"s3a://lake/orders/data/"'
    )
    cfg = load_config(write(tmp_path, inside), environ=ENV)
    table = cfg.tables[0]
    assert table.root == "s3a://lake/orders/" and table.holds("s3a://lake/orders/data/orders-0-0")
    assert not table.holds("s3a://lake/ordersX/orders-0-0") and not table.holds("s3a://landing/orders-0-0")
    broader = inside.replace('"s3a://lake/orders/data/"', '"s3://lake/"')  # a root above the table also reaches in
    assert load_config(write(tmp_path, broader), environ=ENV).tables[0].placement.value == "in_place"
    absolute = SAMPLE.replace("placement: copy_into_table", "placement: in_place_absolute")
    assert load_config(write(tmp_path, absolute), environ=ENV).tables[0].placement.value == "in_place_absolute"


ICEBERG = SAMPLE.replace(
    "tables:\n", "catalogs:\n  - {name: lake, type: rest, uri: 'http://catalog:8181'}\ntables:\n"
).replace("  - name: orders\n", "  - name: sales.orders\n    format: iceberg\n")


def test_an_iceberg_upsert_table_loads_with_its_catalog(tmp_path: Path) -> None:
    text = ICEBERG.replace("topics: [orders]", "topics: [orders]\n    mode: upsert\n    key: [id]\n    cdc: debezium")
    cfg = load_config(write(tmp_path, text), environ=ENV)
    table = cfg.tables[0]
    assert cfg.catalog_of(table).name == "lake"
    assert table.upsert is not None and table.upsert.key == ("id",)


@pytest.mark.parametrize(
    ("addition", "message"),
    [
        ("mode: upsert\n    key: [id]\n    deletion_vectors: false", "position deletes (merge-on-read)"),
        ("type_widening: true", "type_widening: Delta only"),
        ("catalog: {name: sales}", "in its catalog already"),
        ("iceberg_catalog: other", "'other' is not in catalogs[]"),
    ],
)
def test_what_an_iceberg_table_cannot_take_is_refused_by_name(tmp_path: Path, addition: str, message: str) -> None:
    text = ICEBERG.replace("topics: [orders]", "topics: [orders]\n    " + addition)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(write(tmp_path, text), environ=ENV)


def test_partition_by_is_parsed_for_append_and_upsert_tables(tmp_path: Path) -> None:
    text = SAMPLE.replace("partition_by: []", "partition_by: ['day(_kafka_timestamp)', region, 'bucket(8, id)']")
    spec = load_config(write(tmp_path, text), environ=ENV).tables[0].partition_spec
    assert [f.name for f in spec] == ["_kafka_timestamp_day", "region", "id_bucket"]
    upsert = text.replace("topics: [orders]", "topics: [orders]\n    mode: upsert\n    key: [id]")
    assert load_config(write(tmp_path, upsert), environ=ENV).tables[0].partition_spec == spec
    iceberg = ICEBERG.replace("partition_by: []", "partition_by: ['hour(ts)', 'truncate(4, region)']")
    assert [str(f) for f in load_config(write(tmp_path, iceberg), environ=ENV).tables[0].partition_spec] == [
        "hour(ts)",
        "truncate(4, region)",
    ]
