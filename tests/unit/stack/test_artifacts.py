"""The pinned jar groups: POM rendering, fingerprints, and the cache's 'missing' error."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lakegate_stack import artifacts
from lakegate_stack.artifacts import GROUPS, ArtifactGroup, Dependency
from lakegate_stack.errors import ArtifactError

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def test_every_group_renders_a_pom_with_its_pins() -> None:
    for group in GROUPS.values():
        root = ET.fromstring(artifacts.render_pom(group))
        deps = root.findall("m:dependencies/m:dependency", NS)
        parts = ("groupId", "artifactId", "version", "classifier")  # a classifier only where one is pinned
        coords = [":".join(t for p in parts if (t := d.findtext(f"m:{p}", namespaces=NS))) for d in deps]
        assert coords == [d.coordinate for d in group.dependencies]


def test_non_transitive_dependency_excludes_everything() -> None:
    pom = ET.fromstring(artifacts.render_pom(GROUPS["hadoop-aws"]))
    for dep in pom.findall("m:dependencies/m:dependency", NS):
        ex = dep.find("m:exclusions/m:exclusion", NS)
        assert ex is not None and ex.find("m:groupId", NS).text == "*"  # type: ignore[union-attr]


def test_delta_pin_matches_the_installed_delta_spark_and_pyspark() -> None:
    from importlib.metadata import version

    assert version("pyspark") == artifacts.SPARK_VERSION
    assert version("delta-spark") == artifacts.DELTA_VERSION
    delta, avro = GROUPS["delta"].dependencies
    assert avro.coordinate == f"org.apache.spark:spark-avro_2.13:{artifacts.SPARK_VERSION}"
    assert delta.coordinate == f"io.delta:delta-spark_{artifacts.SPARK_VERSION[:3]}_2.13:{artifacts.DELTA_VERSION}"


def test_hadoop_aws_matches_the_hadoop_inside_pyspark() -> None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    assert (jars / f"hadoop-client-api-{artifacts.HADOOP_VERSION}.jar").is_file()


def test_the_log_store_compiles_against_the_pinned_delta_and_hadoop() -> None:
    """delta-log-store/ is built against the Delta and Hadoop the service runs (its POM cannot read
    the pins from Python, so this holds the two in step)."""
    project = GROUPS["log-store"].build_project
    assert project is not None
    pom = ET.parse(artifacts.REPO_ROOT / project / "pom.xml").getroot()
    props = pom.find("m:properties", NS)
    assert props is not None
    assert props.findtext("m:delta.version", namespaces=NS) == artifacts.DELTA_VERSION
    assert props.findtext("m:hadoop.version", namespaces=NS) == artifacts.HADOOP_VERSION


def test_the_iceberg_commit_classes_compile_against_the_pinned_iceberg_and_hadoop() -> None:
    """iceberg-commit/ implements an interface of the Iceberg the service runs (Iceberg 1.11's
    SnapshotAncestryValidator) and qualifies paths with its Hadoop: its POM's pins are held to the
    iceberg group's and the service's Hadoop."""
    project = GROUPS["iceberg-commit"].build_project
    assert project is not None
    props = ET.parse(artifacts.REPO_ROOT / project / "pom.xml").getroot().find("m:properties", NS)
    assert props is not None
    assert props.findtext("m:iceberg.version", namespaces=NS) == artifacts.ICEBERG_VERSION
    assert props.findtext("m:hadoop.version", namespaces=NS) == artifacts.HADOOP_VERSION


def test_the_file_system_jar_the_service_looks_for_is_the_one_the_pom_makes() -> None:
    """The service finds its local file system's jar by name (``*-local-fs.jar``) and puts it on
    the driver's class path; the POM makes that jar with a classifier, holding that class alone."""
    from commit_service.spark.session import LOCAL_FILE_SYSTEM, LOCAL_FILE_SYSTEM_JAR

    project = GROUPS["log-store"].build_project
    assert project is not None
    pom = ET.parse(artifacts.REPO_ROOT / project / "pom.xml").getroot()
    executions = {e.findtext("m:id", namespaces=NS): e for e in pom.iterfind(".//m:execution", NS)}
    class_files = LOCAL_FILE_SYSTEM.replace(".", "/") + "*"
    own = executions["local-fs"].find("m:configuration", NS)
    assert own is not None
    assert f"-{own.findtext('m:classifier', namespaces=NS)}.jar" == LOCAL_FILE_SYSTEM_JAR
    assert [i.text for i in own.iterfind("m:includes/m:include", NS)] == [class_files]
    main_jar = executions["default-jar"].find("m:configuration", NS)
    assert main_jar is not None
    assert [x.text for x in main_jar.iterfind("m:excludes/m:exclude", NS)] == [class_files]


def test_fingerprint_changes_with_a_pin() -> None:
    a = ArtifactGroup("x", "d", (Dependency("g:a:1"),))
    b = ArtifactGroup("x", "d", (Dependency("g:a:2"),))
    assert a.fingerprint() == ArtifactGroup("x", "d", (Dependency("g:a:1"),)).fingerprint()
    assert a.fingerprint() != b.fingerprint()


@pytest.mark.parametrize("bad", ["g:a", "g::1", "g:a:1:", "g:a:1:tests:x"])
def test_bad_coordinate_is_rejected(bad: str) -> None:
    with pytest.raises(ArtifactError, match="bad Maven coordinate"):
        Dependency(bad)


def test_a_classifier_is_rendered_as_its_own_element() -> None:
    dep = Dependency("org.example:lib:1.0:test-fixtures", exclusions=("*:*",))
    assert dep.gav == ("org.example", "lib", "1.0") and dep.classifier == "test-fixtures"
    assert Dependency("org.example:lib:1.0").classifier is None
    pom = ET.fromstring(artifacts.render_pom(ArtifactGroup("x", "d", (dep,))))
    [rendered] = pom.findall("m:dependencies/m:dependency", NS)
    assert rendered.findtext("m:artifactId", namespaces=NS) == "lib"
    assert rendered.findtext("m:version", namespaces=NS) == "1.0"
    assert rendered.findtext("m:classifier", namespaces=NS) == "test-fixtures"


def test_the_iceberg_rest_server_takes_the_fixture_and_test_jars_by_classifier() -> None:
    classified = {d.gav[1]: d.classifier for d in GROUPS["iceberg-rest"].dependencies if d.classifier}
    assert classified == {"iceberg-open-api": "test-fixtures", "iceberg-core": "tests"}
    runtime, *drivers = GROUPS["iceberg"].dependencies
    assert {d.gav[1] for d in drivers} == {"sqlite-jdbc", "postgresql"}  # the JDBC catalog's
    assert runtime.gav == (
        "org.apache.iceberg",
        f"iceberg-spark-runtime-{artifacts.SPARK_VERSION[:3]}_2.13",
        artifacts.ICEBERG_VERSION,
    )


def test_missing_group_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="run scripts/fetch-jars kafka"):
        artifacts.jars_of("kafka", tmp_path)


def test_stale_stamp_counts_as_missing(tmp_path: Path) -> None:
    d = tmp_path / "kafka"
    d.mkdir()
    (d / "x.jar").write_bytes(b"")
    (d / artifacts.STAMP_FILE).write_text("not-the-fingerprint\n")
    assert not artifacts.is_resolved(GROUPS["kafka"], tmp_path)
    (d / artifacts.STAMP_FILE).write_text(GROUPS["kafka"].fingerprint() + "\n")
    assert artifacts.jars_of("kafka", tmp_path) == [d / "x.jar"]


def test_resolve_reports_a_missing_maven(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="not found on PATH"):
        artifacts.resolve(GROUPS["kafka"], tmp_path, mvn="no-such-mvn-binary")


def test_the_peer_sink_plugin_leaves_kafka_and_logging_to_the_worker() -> None:
    group = artifacts.GROUPS["iceberg-sink"]
    assert any(d.coordinate.startswith("org.apache.iceberg:iceberg-kafka-connect:") for d in group.dependencies)
    assert {"kafka-clients", "slf4j-", "log4j-"} <= set(group.drop_prefixes)


def test_the_spark_ui_plugin_compiles_against_the_spark_and_libraries_pyspark_ships() -> None:
    """delta-log-store/'s Spark UI plugin is built against the Spark, Scala, scala-xml, Jackson and
    servlet API the service runs: each pin of its POM names a jar pyspark ships."""
    import pyspark

    props = ET.parse(artifacts.REPO_ROOT / "delta-log-store" / "pom.xml").getroot().find("m:properties", NS)
    assert props is not None
    pin = {p.tag.split("}")[1]: p.text for p in props}
    assert pin["spark.version"] == artifacts.SPARK_VERSION
    shipped = {p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    scala = pin["scala.binary.version"]
    for jar in (
        f"spark-core_{scala}-{pin['spark.version']}.jar",
        f"spark-common-utils_{scala}-{pin['spark.version']}.jar",
        f"spark-kvstore_{scala}-{pin['spark.version']}.jar",
        f"scala-library-{pin['scala.version']}.jar",
        f"scala-xml_{scala}-{pin['scala-xml.version']}.jar",
        f"jackson-databind-{pin['jackson.version']}.jar",
        f"jackson-annotations-{pin['jackson-annotations.version']}.jar",
        f"jakarta.servlet-api-{pin['jakarta-servlet.version']}.jar",
    ):
        assert jar in shipped, jar
