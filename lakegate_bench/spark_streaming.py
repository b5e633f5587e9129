"""The peer of ``scripts/bench --parts pipeline``: a Spark Structured Streaming job, Kafka -> Delta.

Started by ``lakegate_bench/pipeline.py`` in its own process (its CPU is measured apart):
``readStream.format("kafka")`` on one topic, the JSON value parsed with ``from_json`` into the
same columns Lakegate's table gets, ``writeStream.format("delta")`` with a checkpoint and
``trigger(processingTime=<seconds>)``, on the same Spark and Delta as the service (local[2],
s3a to the same S3 server). Writes ``--ready-file`` once the query has made its first batch, then
runs until terminated.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from commit_service.config import S3Settings, SparkSettings
from commit_service.spark.session import create_session, spark_jars
from lakegate_core.cache import default_jars_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--table", required=True, help="the Delta table's s3a:// location")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint directory")
    parser.add_argument("--trigger-seconds", type=int, required=True)
    parser.add_argument("--s3-endpoint", required=True)
    parser.add_argument("--ready-file", type=Path, required=True)
    args = parser.parse_args(argv)

    kafka_jars = sorted((default_jars_dir() / "spark-kafka").glob("*.jar"))
    if not kafka_jars:
        print("no spark-kafka jars: run scripts/fetch-jars spark-kafka", file=sys.stderr)
        return 2
    jars = [*spark_jars(None, with_s3a=True), *kafka_jars]
    settings = SparkSettings(
        master="local[2]",
        app_name="bench-spark-structured-streaming",
        ui_enabled=False,
        driver_memory="1g",
        local_dir=Path(args.checkpoint).parent / "ss-spark",
        s3=S3Settings(endpoint=args.s3_endpoint, access_key=None, secret_key=None),
        conf={"spark.jars": ",".join(str(j) for j in jars)},
    )
    spark = create_session(settings)
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("produced_ms", LongType()),
            StructField("amount", DoubleType()),
            StructField("note", StringType()),
        ]
    )
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    rows = source.select(F.from_json(F.col("value").cast("string"), schema).alias("v")).select("v.*")
    query = (
        rows.writeStream.format("delta")
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=f"{args.trigger_seconds} seconds")
        .start(args.table)
    )
    while query.lastProgress is None:  # the first (empty) batch: the query runs
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        time.sleep(0.2)
    args.ready_file.write_text("ready\n")
    query.awaitTermination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
