"""The JVM classes, static methods and constants a commit calls, looked up once per committer.

Built by :class:`~commit_service.delta.committer.DeltaCommitter` (and its
:class:`~commit_service.delta.jvm_actions.ActionBuilder`) when it is made; read on every commit.

py4j resolves ``jvm.org.apache.spark.sql.delta.DeltaLog`` one name at a time, a round trip each,
asking the JVM whether ``org``, ``org.apache``, ... is a class. Each package prefix is a miss, and
a miss is a search of every jar on Spark's class path: about 1 ms for ``jvm.scala.Option``, 2 ms
for ``DeltaLog``. Calling a static method costs one more round trip to look the member up. A
one-file commit on a local table made 32 such lookups (16 of them misses) among its 112 py4j
commands. Here each class is looked up by its whole name (one round trip, no miss), each static
method once, and the constants (``OutputMode.Append()``, ``None``, Delta's JSON mapper) are read
once. py4j members and objects may be called from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commit_service.spark import jvm_classes


@dataclass(frozen=True)
class JvmHandles:
    """What the commit path calls in the JVM, each resolved once (see the module's doc)."""

    set_active_session: Any  # SparkSession.setActiveSession (the classic session)
    delta_log_for_table: Any  # DeltaLog.forTable
    streaming_update: Any  # DeltaOperations.StreamingUpdate: its constructor
    append_mode: Any  # OutputMode.Append()
    none: Any  # scala.None
    some: Any  # scala.Option.apply
    as_java: Any  # scala.jdk.javaapi.CollectionConverters.asJava
    as_scala: Any  # scala.jdk.javaapi.CollectionConverters.asScala
    array_list: Any  # java.util.ArrayList: its constructor
    action_from_json: Any  # Delta's Action.fromJson
    json_mapper: Any  # Delta's JsonUtils.mapper(): the Jackson mapper that reads and writes the log

    @classmethod
    def resolve(cls, jvm: Any) -> JvmHandles:
        def java_class(name: str) -> Any:
            return jvm_classes.java_class(jvm, name)

        option = java_class("scala.Option")
        converters = java_class("scala.jdk.javaapi.CollectionConverters")
        return cls(
            set_active_session=java_class("org.apache.spark.sql.classic.SparkSession").setActiveSession,
            delta_log_for_table=java_class("org.apache.spark.sql.delta.DeltaLog").forTable,
            streaming_update=java_class("org.apache.spark.sql.delta.DeltaOperations").StreamingUpdate,
            append_mode=java_class("org.apache.spark.sql.streaming.OutputMode").Append(),
            none=option.empty(),
            some=option.apply,
            as_java=converters.asJava,
            as_scala=converters.asScala,
            array_list=java_class("java.util.ArrayList"),
            action_from_json=java_class("org.apache.spark.sql.delta.actions.Action").fromJson,
            json_mapper=java_class("org.apache.spark.sql.delta.util.JsonUtils").mapper(),
        )
