"""``java_class``: a class is looked up by its whole name, once per JVM (a py4j ``JVMView`` asks
the JVM for each attribute it is given; the real one: every Iceberg and Delta test)."""

from __future__ import annotations

from commit_service.spark.jvm_classes import java_class, java_elements


class FakeJvm:
    """Answers an attribute as py4j's view does (a round trip each), and counts them."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __getattr__(self, name: str) -> str:
        self.asked.append(name)
        return f"class {name}"


def test_a_class_is_looked_up_by_its_whole_name_once() -> None:
    jvm = FakeJvm()
    for _ in range(3):
        assert java_class(jvm, "org.apache.iceberg.util.SnapshotUtil") == "class org.apache.iceberg.util.SnapshotUtil"
    assert java_class(jvm, "java.util.ArrayList") == "class java.util.ArrayList"
    assert jvm.asked == ["org.apache.iceberg.util.SnapshotUtil", "java.util.ArrayList"]


def test_each_jvm_has_its_own_classes() -> None:
    first, second = FakeJvm(), FakeJvm()
    java_class(first, "scala.Option")
    java_class(second, "scala.Option")
    assert first.asked == ["scala.Option"] and second.asked == ["scala.Option"]


class FakeJavaList:
    """A py4j Java list: its array by index; iterating it would end in a JVM exception."""

    def __init__(self, items: list[str]) -> None:
        self.items = items

    def toArray(self) -> list[str]:  # noqa: N802 (Java's name)
        return list(self.items)

    def __iter__(self) -> None:
        raise AssertionError("iterated in Python: its end is a JVM exception")


def test_a_java_collection_is_read_by_index_not_iterated() -> None:
    assert java_elements(FakeJavaList(["day(ts)", "bucket(16, id)"])) == ["day(ts)", "bucket(16, id)"]
    assert java_elements(FakeJavaList([])) == []
