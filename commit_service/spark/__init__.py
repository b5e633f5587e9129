"""The process's one SparkSession and Spark's plumbing, for both table formats (Delta in
``commit_service.delta``, Iceberg in ``commit_service.iceberg``) and the round they share
(``commit_service.round``); imported by those and, for :class:`SparkHandle` alone, by the HTTP
layer that starts the session.

- ``session``: the SparkSession factory and its properties (``SparkHandle``, ``create_session``,
  ``job_label``): the Delta and Iceberg extensions, the Iceberg catalogs, s3a;
- ``ui_events`` / ``row_audit``: commits on the Spark UI's tab; the audit's questions to rows;
- ``java_errors``: what the JVM threw, classified by exception class;
- ``thread_priority``: the CPU priority of the JVM thread behind a Python thread.

pyspark loads only when the service starts Spark: nothing here imports it at module level.
"""

from __future__ import annotations

from commit_service.spark.session import SparkHandle

__all__ = ["SparkHandle"]
