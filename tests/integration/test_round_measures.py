"""What a round measures in the pass that reads it (commit_service.round.changes.Measured): the
values Spark's ``observe`` reports, no Spark job of their own, and where Spark runs no pass (an
empty frame below a shuffle), the same values from a job that counts them."""

from __future__ import annotations

from typing import Any

from commit_service.round.changes import Measured


def jobs(spark: Any) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(None))


def test_measures_come_with_the_pass_that_reads_the_frame_and_no_job_of_their_own(spark: Any) -> None:
    from pyspark.sql import functions as F

    frame = spark.range(0, 1000).selectExpr("id % 300 AS k", "id")
    counted = Measured("rows", F.count(F.lit(1)).alias("n"), F.min("k").alias("lo"), F.max("k").alias("hi"))
    kept = counted.on(frame).where(F.col("id") >= 100).localCheckpoint()
    before = jobs(spark)
    assert counted.values() == {"n": 1000, "lo": 0, "hi": 299}
    assert jobs(spark) == before  # taken in the checkpoint's pass
    assert kept.count() == 900


def test_measures_of_a_frame_spark_never_reads_are_counted_by_a_job(spark: Any) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    counted = Measured("rows", F.count(F.lit(1)).alias("n"), F.max("id").alias("hi"))
    last = F.row_number().over(Window.partitionBy("id").orderBy("id"))  # as changes.latest keeps each key's last
    # empty below a shuffle: Spark's adaptive plan drops the empty side unread and reports no measures
    counted.on(spark.range(0)).withColumn("r", last).localCheckpoint()
    assert counted.values() == {"n": 0, "hi": None}
