"""Java exceptions classified by class (commit_service.spark.java_errors), with real JVM throwables."""

from __future__ import annotations

from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from commit_service.spark.java_errors import Failure, classify, java_summary


def thrown(spark: Any, call: Any) -> Exception:
    """What a JVM call raises in Python (py4j's error, or PySpark's conversion of it)."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type is what is under test
        call(spark._jvm)
    return info.value


def wrapped(throwable: Any) -> Py4JJavaError:
    return Py4JJavaError("An error occurred while calling o1.commit.\n", throwable)


def test_classes_not_messages_decide(spark: Any) -> None:
    missing = thrown(spark, lambda jvm: jvm.java.io.FileInputStream("/nonexistent/_delta_log/00.json"))
    assert classify(missing) is Failure.UNAVAILABLE  # FileNotFoundException is an IOException
    assert java_summary(missing).startswith("FileNotFoundException: /nonexistent")
    bad_number = thrown(spark, lambda jvm: jvm.java.lang.Integer.parseInt("ConcurrentAppendException"))
    assert classify(bad_number) is Failure.DELTA  # the message names a conflict; the class does not
    jvm = spark._jvm
    assert (
        classify(wrapped(jvm.io.delta.exceptions.ConcurrentAppendException("files were added"))) is Failure.CONCURRENT
    )
    assert classify(wrapped(jvm.io.delta.exceptions.MetadataChangedException("schema changed"))) is Failure.CONCURRENT
    nested = jvm.org.apache.spark.SparkException("Job aborted", jvm.java.io.IOException("task could not read"))
    assert classify(wrapped(nested)) is Failure.DELTA  # a task's I/O error is the plan's, not an outage
    assert classify(KeyError("x")) is Failure.UNEXPECTED
    # delta-spark's Python conversion of a conflict (active once delta.tables is imported) holds no
    # Java throwable; its class still says what it is
    from delta.exceptions.base import ConcurrentAppendException

    assert classify(ConcurrentAppendException("a concurrent MERGE added data")) is Failure.CONCURRENT
    assert "\n" not in java_summary(wrapped(nested)) and "at org." not in java_summary(wrapped(nested))
