"""A streaming job for the sink's exactly-once tests: static topic -> static topic.

    python pipe_topics.py NAMESRV INPUT OUTPUT CHECKPOINT run|finish [--fail-first-attempts]
        [--at-least-once] [--transactional]
run: keep streaming until killed; finish: Trigger.AvailableNow, then exit.
--fail-first-attempts: every task's first attempt fails half-way through its rows (Spark retries
it: local[2,4] allows task retries).
--at-least-once: the sink's deliveryGuarantee=at-least-once (default: exactly-once).
--transactional: the sink's deliveryGuarantee=exactly-once-transactional (RocketMQ's half messages).
"""

import sys

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf

from staticmq_spark.session.configure import AVAILABLE_NOW_WRAPPER
from staticmq_spark.session.features import AVAILABLE_NOW_SPLITS

namesrv, source_topic, sink_topic, checkpoint, mode = sys.argv[1:6]
inject = "--fail-first-attempts" in sys.argv
guarantee = "at-least-once" if "--at-least-once" in sys.argv else "exactly-once"
if "--transactional" in sys.argv:
    guarantee = "exactly-once-transactional"
builder = SparkSession.builder.master("local[2,4]").config("spark.ui.enabled", "false")
if not AVAILABLE_NOW_SPLITS:  # pyspark < 4.2: what docs/deployment.md tells such a session to set
    builder = builder.config(AVAILABLE_NOW_WRAPPER, "true")
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")


@udf("string")
def maybe_fail(value: str) -> str:
    ctx = TaskContext.get()
    if inject and ctx is not None and ctx.attemptNumber() == 0 and value.endswith("7"):
        raise RuntimeError("injected task failure")
    return value


df = (
    spark.readStream.format("staticmq")
    .option("namesrv", namesrv)
    .option("topic", source_topic)
    .option("startingOffsets", "earliest")
    .option("maxMessagesPerTrigger", "300")
    .load()
    .select(col("key"), maybe_fail(col("value").cast("string")).alias("value"))
)
writer = (
    df.writeStream.format("staticmq")
    .option("namesrv", namesrv)
    .option("topic", sink_topic)
    .option("checkpointLocation", checkpoint)
    .option("deliveryGuarantee", guarantee)
)
if mode == "finish":
    writer.trigger(availableNow=True).start().awaitTermination()
else:
    writer.trigger(processingTime="200 milliseconds").start().awaitTermination()
