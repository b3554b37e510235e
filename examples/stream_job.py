"""A Spark Structured Streaming job for spark-submit: clean page views from one static topic and
write them back, keyed by user, to another static topic (exactly once, fixed sharding).

    spark-submit --master local[2] --properties-file conf/spark-defaults.conf \\
        examples/stream_job.py --namesrv 127.0.0.1:9876 \\
        --input-topic pageviews --output-topic clean-views --checkpoint /tmp/clean-views-ck

Executors need the staticmq package: install it on every node (pip install .), or ship the wheel
copied to a .zip name with `--py-files dist/staticmq.zip` (pyspark adds .zip, .egg and .jar files
of --py-files to sys.path, not .whl; the dependencies - pyarrow, grpcio, protobuf, numpy - must be
installed there either way). The job registers the data source
explicitly, so it also works where the package is not installed on the driver.
"""

from __future__ import annotations

import argparse

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, from_json, struct, to_json

from staticmq_spark import configure_spark

EVENT_SCHEMA = "user STRING, page STRING, ms BIGINT, dwell INT"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", required=True, help="name server HOST:PORT, or rocketmq://HOST:PORT")
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--checkpoint", required=True, help="checkpoint directory (restart from it)")
    parser.add_argument("--available-now", action="store_true", help="process what is there, then exit")
    parser.add_argument("--max-messages-per-trigger", default="50000")
    args = parser.parse_args()

    # configure_spark registers format("staticmq") so that each query's Python runner starts fast
    spark = configure_spark(SparkSession.builder.appName("staticmq-clean-views")).getOrCreate()

    views = (
        spark.readStream.format("staticmq")
        .option("namesrv", args.namesrv)
        .option("topic", args.input_topic)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", args.max_messages_per_trigger)
        .load()
        .select(from_json(col("value").cast("string"), EVENT_SCHEMA).alias("e"), "storeTimestamp")
        .select("e.*", "storeTimestamp")
        .where(col("user").isNotNull() & (col("dwell") > 0))
    )
    clean = views.select(
        col("user").alias("key"),
        to_json(struct("user", "page", (col("dwell") / 1.0).alias("dwell_s"), "storeTimestamp")).alias("value"),
    )
    writer = (
        clean.writeStream.format("staticmq")
        .option("namesrv", args.namesrv)
        .option("topic", args.output_topic)
        .option("checkpointLocation", args.checkpoint)
    )
    query = writer.trigger(availableNow=True).start() if args.available_now else writer.start()
    query.awaitTermination()


if __name__ == "__main__":
    main()
