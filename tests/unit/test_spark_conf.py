"""The Spark factory's configuration, computed without a JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from commit_service.errors import SparkSetupError
from commit_service.spark import S3Settings, SparkSettings, spark_conf, spark_jars


@pytest.fixture
def jars_dir(tmp_path: Path) -> Path:
    for group, names in {"delta": ["delta-spark.jar", "delta-storage.jar"], "hadoop-aws": ["hadoop-aws.jar"]}.items():
        (tmp_path / group).mkdir()
        for n in names:
            (tmp_path / group / n).write_bytes(b"")
    return tmp_path


def test_local_defaults_configure_delta_and_the_ui(jars_dir: Path) -> None:
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, ui_port=4141))
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert conf["spark.ui.port"] == "4141"
    assert [Path(p).name for p in conf["spark.jars"].split(",")] == ["delta-spark.jar", "delta-storage.jar"]
    assert not any(k.startswith("spark.hadoop.fs.s3a") for k in conf)


def test_s3a_adds_hadoop_aws_and_endpoint_settings(jars_dir: Path) -> None:
    s3 = S3Settings(endpoint="http://127.0.0.1:9000", access_key="a", secret_key="b")
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, master="spark://h:7077", s3=s3))
    assert conf["spark.master"] == "spark://h:7077"
    assert "hadoop-aws.jar" in conf["spark.jars"]
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "a"


def test_s3a_without_keys_leaves_credentials_to_the_environment(jars_dir: Path) -> None:
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, s3=S3Settings()))
    assert "spark.hadoop.fs.s3a.access.key" not in conf
    assert "spark.hadoop.fs.s3a.aws.credentials.provider" not in conf


def test_user_conf_wins(jars_dir: Path) -> None:
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, conf={"spark.sql.shuffle.partitions": "64"}))
    assert conf["spark.sql.shuffle.partitions"] == "64"


def test_missing_jars_say_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(SparkSetupError, match="scripts/fetch-jars delta hadoop-aws"):
        spark_jars(tmp_path, with_s3a=True)


def test_half_credentials_are_refused() -> None:
    with pytest.raises(SparkSetupError, match="both access_key and secret_key"):
        S3Settings(access_key="only")


def test_bad_ui_port_is_refused() -> None:
    with pytest.raises(SparkSetupError, match="not a TCP port"):
        SparkSettings(ui_port=70000)
