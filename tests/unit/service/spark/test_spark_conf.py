"""The Spark factory's configuration, computed without a JVM."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from commit_service.config import CatalogType, IcebergCatalog, S3Settings, ServiceConfig, SparkSettings
from commit_service.errors import SparkSetupError
from commit_service.spark.session import (
    GC_OPTIONS,
    JIT_OPTIONS,
    UI_PLUGIN,
    driver_environment,
    s3a_credentials,
    spark_conf,
    spark_jars,
)
from lakegate_core.configfile import build


@pytest.fixture
def jars_dir(tmp_path: Path) -> Path:
    groups = {
        "delta": ["delta-spark.jar", "delta-storage.jar"],
        "log-store": ["lakegate-delta-log-store.jar", "lakegate-delta-log-store-local-fs.jar"],
        "hadoop-aws": ["hadoop-aws.jar"],
    }
    for group, names in groups.items():
        (tmp_path / group).mkdir()
        for n in names:
            (tmp_path / group / n).write_bytes(b"")
    with zipfile.ZipFile(tmp_path / "log-store" / "lakegate-delta-log-store.jar", "w") as jar:
        jar.writestr(UI_PLUGIN.replace(".", "/") + ".class", b"")
    return tmp_path


def test_local_defaults_configure_delta_and_the_ui(jars_dir: Path) -> None:
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, ui_port=4141))
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert conf["spark.ui.port"] == "4141"
    jars = [Path(p).name for p in conf["spark.jars"].split(",")]
    assert jars == [
        "delta-spark.jar",
        "delta-storage.jar",
        "lakegate-delta-log-store-local-fs.jar",
        "lakegate-delta-log-store.jar",
    ]
    assert not any(k.startswith("spark.hadoop.fs.s3a") for k in conf)
    # file: tables' log through Lakegate's LocalLogStore, for Delta on Spark and Delta Kernel
    assert conf["spark.delta.logStore.file.impl"] == "io.lakegate.delta.LocalListFromLogStore"
    assert conf["spark.hadoop.io.delta.kernel.logStore.file.impl"] == "io.lakegate.delta.LocalListFromLogStore"
    # local files' permissions without a chmod process; its jar on the driver's class path from the
    # JVM's start (spark-submit opens the jars through it)
    assert conf["spark.hadoop.fs.file.impl"] == "io.lakegate.delta.NioPermissionsLocalFileSystem"
    assert conf["spark.driver.extraClassPath"] == str(jars_dir / "log-store" / "lakegate-delta-log-store-local-fs.jar")
    # no per-commit parse of every added file's statistics for Delta's auto compaction
    assert conf["spark.databricks.delta.autoCompact.recordPartitionStats.enabled"] == "false"


def test_s3a_adds_hadoop_aws_and_endpoint_settings(jars_dir: Path) -> None:
    s3 = S3Settings(endpoint="http://127.0.0.1:9000", access_key="a", secret_key="b")
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, master="spark://h:7077", s3=s3))
    assert conf["spark.master"] == "spark://h:7077"
    assert "hadoop-aws.jar" in conf["spark.jars"]
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.delta.enableFastS3AListFrom"] == "true"  # the log is listed from the checkpoint on
    mine = spark_conf(
        SparkSettings(jars_dir=jars_dir, s3=s3, conf={"spark.hadoop.delta.enableFastS3AListFrom": "false"})
    )
    assert mine["spark.hadoop.delta.enableFastS3AListFrom"] == "false"  # spark.conf wins


def test_static_credentials_stay_off_the_command_line(jars_dir: Path) -> None:
    """Builder properties go on spark-submit's command line (world-readable): no key may be among them;
    they are set on the live session's Hadoop configuration instead."""
    s3 = S3Settings(endpoint="http://127.0.0.1:9000", access_key="AKIA-not-secret", secret_key="very-secret-value")
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, s3=s3))
    assert not [k for k, v in conf.items() if "very-secret-value" in v or "AKIA-not-secret" in v]
    assert not [k for k in conf if "access.key" in k or "secret.key" in k or "credentials.provider" in k]
    assert s3a_credentials(s3) == {
        "fs.s3a.access.key": "AKIA-not-secret",
        "fs.s3a.secret.key": "very-secret-value",
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }


def test_s3a_without_keys_leaves_credentials_to_the_environment(jars_dir: Path) -> None:
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, s3=S3Settings()))
    assert "spark.hadoop.fs.s3a.access.key" not in conf
    assert "spark.hadoop.fs.s3a.aws.credentials.provider" not in conf
    assert s3a_credentials(S3Settings()) == {}


@pytest.mark.parametrize(
    ("ui_host", "env"),
    [
        ("127.0.0.1", {"SPARK_LOCAL_IP": "127.0.0.1"}),
        ("10.1.2.3", {"SPARK_LOCAL_IP": "10.1.2.3"}),
        ("[::1]", {"SPARK_LOCAL_IP": "::1"}),
        ("0.0.0.0", {}),
        ("::", {}),
        (None, {}),
    ],
)
def test_the_ui_binds_to_ui_host_through_the_driver_environment(
    jars_dir: Path, ui_host: str | None, env: dict[str, str]
) -> None:
    settings = SparkSettings(jars_dir=jars_dir, ui_host=ui_host)
    assert driver_environment(settings) == env
    assert not any("host" in k or "bindAddress" in k for k in spark_conf(settings))


def test_ui_host_defaults_to_the_service_host() -> None:
    base = {
        "auth": {"enabled": False},
        "storage": {"allowed_roots": ["file:///lake/"]},
        "tables": [{"name": "t", "path": "/lake/t", "topics": ["t"]}],
    }
    local = build(ServiceConfig, {**base, "server": {"host": "127.0.0.1"}})
    assert local.spark_settings().ui_host == "127.0.0.1"
    explicit = build(ServiceConfig, {**base, "server": {"host": "127.0.0.1"}, "spark": {"ui_host": "10.0.0.7"}})
    assert explicit.spark_settings().ui_host == "10.0.0.7"
    assert build(ServiceConfig, base).spark_settings().ui_host == "0.0.0.0"


def test_user_conf_wins(jars_dir: Path) -> None:
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, conf={"spark.sql.shuffle.partitions": "64"}))
    assert conf["spark.sql.shuffle.partitions"] == "64"


def test_a_user_class_path_is_added_to_the_file_system_s_jar(jars_dir: Path) -> None:
    conf = spark_conf(SparkSettings(jars_dir=jars_dir, conf={"spark.driver.extraClassPath": "/opt/mine.jar"}))
    fs_jar = jars_dir / "log-store" / "lakegate-delta-log-store-local-fs.jar"
    assert conf["spark.driver.extraClassPath"] == f"{fs_jar}:/opt/mine.jar"


def test_a_user_s_java_options_follow_lakegate_s(jars_dir: Path, tmp_path: Path) -> None:
    mine = "-XX:CompileThresholdScaling=1 -Dmy.flag=1"
    conf = spark_conf(
        SparkSettings(jars_dir=jars_dir, local_dir=tmp_path, conf={"spark.driver.extraJavaOptions": mine})
    )
    options = conf["spark.driver.extraJavaOptions"].split()
    assert options == [JIT_OPTIONS, GC_OPTIONS, f"-Dderby.system.home={tmp_path / 'derby'}", *mine.split()]


def test_the_driver_compiles_only_what_runs_hot(jars_dir: Path) -> None:
    """Lukewarm code stays interpreted (45% of a steady service's CPU was compiling it): the JIT's
    counts are raised on the driver's command line, with or without a local folder."""
    options = spark_conf(SparkSettings(jars_dir=jars_dir))["spark.driver.extraJavaOptions"]
    assert "-XX:CompileThresholdScaling=10" in options.split()


def test_the_driver_collects_garbage_with_the_throughput_collector_unless_the_user_says_otherwise(
    jars_dir: Path,
) -> None:
    """A round's records die young: the parallel collector, not G1's concurrent threads (a fifth of
    an upsert round's CPU); a user's own collector replaces it (a JVM given two does not start:
    checked with the machine's own java), and the user's other flags come after Lakegate's."""
    options = spark_conf(SparkSettings(jars_dir=jars_dir))["spark.driver.extraJavaOptions"].split()
    assert options == ["-XX:CompileThresholdScaling=10", "-XX:+UseParallelGC"]
    for user, want in (
        ("-XX:+UseG1GC", ["-XX:CompileThresholdScaling=10", "-XX:+UseG1GC"]),
        ("-Xss4m -XX:+UseSerialGC", ["-XX:CompileThresholdScaling=10", "-Xss4m", "-XX:+UseSerialGC"]),
        (
            "-XX:+UseGCOverheadLimit",
            ["-XX:CompileThresholdScaling=10", "-XX:+UseParallelGC", "-XX:+UseGCOverheadLimit"],
        ),
    ):
        mine = spark_conf(SparkSettings(jars_dir=jars_dir, conf={"spark.driver.extraJavaOptions": user}))
        got = mine["spark.driver.extraJavaOptions"].split()
        assert got == want, user
        java = shutil.which("java")
        if java is not None:  # the JVM takes these options as the driver is started with them
            started = subprocess.run([java, *got, "-version"], capture_output=True, text=True, timeout=60)
            assert started.returncode == 0, f"{user}: {started.stderr}"


def test_a_log_store_build_without_the_file_system_says_what_to_run(jars_dir: Path) -> None:
    (jars_dir / "log-store" / "lakegate-delta-log-store-local-fs.jar").unlink()
    with pytest.raises(SparkSetupError, match="scripts/fetch-jars log-store"):
        spark_conf(SparkSettings(jars_dir=jars_dir))


def test_a_log_store_build_without_the_ui_plugin_says_what_to_run(jars_dir: Path) -> None:
    (jars_dir / "log-store" / "lakegate-delta-log-store.jar").write_bytes(b"")  # built before the plugin
    with pytest.raises(SparkSetupError, match="scripts/fetch-jars log-store"):
        spark_conf(SparkSettings(jars_dir=jars_dir))


def test_the_ui_plugin_joins_the_users_plugins(jars_dir: Path) -> None:
    assert spark_conf(SparkSettings(jars_dir=jars_dir))["spark.plugins"] == UI_PLUGIN
    mine = spark_conf(SparkSettings(jars_dir=jars_dir, conf={"spark.plugins": "com.example.P"}))
    assert mine["spark.plugins"] == f"{UI_PLUGIN},com.example.P"


def test_missing_jars_say_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(SparkSetupError, match="scripts/fetch-jars delta log-store hadoop-aws"):
        spark_jars(tmp_path, with_s3a=True)


def test_half_credentials_are_refused() -> None:
    with pytest.raises(SparkSetupError, match="both access_key and secret_key"):
        S3Settings(access_key="only")


def test_bad_ui_port_is_refused() -> None:
    with pytest.raises(SparkSetupError, match="not a TCP port"):
        SparkSettings(ui_port=70000)


def test_an_iceberg_catalog_reaches_s3_through_s3fileio_with_the_services_s3_settings() -> None:
    catalog = IcebergCatalog("lake", CatalogType.REST, "http://rest:8181", properties={"s3.endpoint": "http://mine"})
    prefix = "spark.sql.catalog.lake."
    s3 = S3Settings("http://s3:9000", region="eu-west-1", path_style=False, access_key="id", secret_key="sec")
    conf = {k.removeprefix(prefix): v for k, v in catalog.spark_conf(s3).items()}
    assert conf["io-impl"] == "org.apache.iceberg.io.ResolvingFileIO"
    assert conf["client.region"] == "eu-west-1" and conf["s3.path-style-access"] == "false"
    assert conf["s3.access-key-id"] == "id" and conf["s3.secret-access-key"] == "sec"
    assert conf["s3.endpoint"] == "http://mine"  # the catalog's own properties win
    # credentials from the AWS environment: none set here, S3FileIO takes the SDK's chain
    keys = {k.removeprefix(prefix) for k in catalog.spark_conf(S3Settings())}
    assert "client.region" in keys and not {"s3.access-key-id", "s3.secret-access-key"} & keys
    # no storage.s3: Hadoop's file systems, as Spark reads the files
    assert catalog.spark_conf(None)[prefix + "io-impl"] == "org.apache.iceberg.hadoop.HadoopFileIO"


def test_a_rest_catalog_posts_no_metrics_reports_unless_its_properties_say_so() -> None:
    key = "spark.sql.catalog.lake.rest-metrics-reporting-enabled"
    assert IcebergCatalog("lake", CatalogType.REST, "http://rest:8181").spark_conf()[key] == "false"
    on = IcebergCatalog(
        "lake", CatalogType.REST, "http://rest:8181", properties={"rest-metrics-reporting-enabled": "true"}
    )
    assert on.spark_conf()[key] == "true"
    jdbc = IcebergCatalog("lake", CatalogType.JDBC, "jdbc:sqlite:/tmp/c.db", warehouse="file:///tmp/w")
    assert key not in jdbc.spark_conf()
