"""A batch write through the exactly-once sink on RocketMQ whose first attempt of partition 0 loses
a Python worker to SIGKILL after the sink staged a chunk of that attempt.

    python write_killing_a_worker.py NAMESRV TOPIC STAGING_TOPIC ROWS MARKER

Rows 0..ROWS-1 in two partitions, keyed "user-<id % 37>", value "<id>" and 1024 dots, through a
Python UDF. On
attempt 0 of partition 0, at row ROWS // 4, the UDF's worker waits until the (fresh) staging topic
holds a staged message in partition 0's staging queue - a chunk of this very attempt, the only one
staging there - writes MARKER ("staged <n>") and kills itself with os.kill(os.getpid(), SIGKILL).
local[2,4] lets Spark retry the task; the script exits 0 once the write has committed."""

import os
import signal
import sys
import time

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf

from staticmq_spark.backends.registry import open_backend
from staticmq_spark.errors import StaticMQError

namesrv, topic, staging, rows, marker = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
spark = (
    SparkSession.builder.master("local[2,4]")
    .config("spark.ui.enabled", "false")
    .config("spark.python.worker.reuse", "true")
    .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100")  # the sink stages as rows arrive
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")


errors: list[str] = []
# a Python worker sends its results back when its output buffer (64 KiB) fills: 1 KiB rows make the
# rows before the kill point reach the sink while the UDF waits
PAD = "." * 1024


def staged_in_queue_zero() -> int:
    """Messages in queue 0 (partition 0's staging queue) of the staging topic, on every broker."""
    backend = open_backend(namesrv)
    try:
        client = backend.instance  # type: ignore[attr-defined]
        total = 0
        for addr in client.brokers().values():  # the masters (the staging topic is on each)
            try:
                total += client.remoting.max_offset(addr, staging, 0, logic=False)
            except StaticMQError as exc:
                errors.append(f"{addr}: {exc}")  # not created on that broker yet
        return total
    finally:
        backend.close()


@udf("string")
def kill_after_staging(value: str) -> str:
    ctx = TaskContext.get()
    if ctx is not None and ctx.attemptNumber() == 0 and ctx.partitionId() == 0 and int(value) == rows // 4:
        deadline = time.monotonic() + 60
        staged = staged_in_queue_zero()
        while staged == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            staged = staged_in_queue_zero()
        with open(marker, "w") as f:
            f.write(f"staged {staged}\n{errors[-3:]}\n")
        if staged == 0:
            raise RuntimeError("the sink staged nothing of partition 0 before the kill point")
        os.kill(os.getpid(), signal.SIGKILL)
    return value + PAD


df = spark.range(0, rows, numPartitions=2).selectExpr(
    "concat('user-', cast(id % 37 as string)) as key", "cast(id as string) as value"
)
(
    df.select("key", kill_after_staging(col("value")).alias("value"))
    .write.format("staticmq")
    .option("namesrv", namesrv)
    .option("topic", topic)
    .option("stagingTopic", staging)
    .option("requestBytes", "20000")
    .mode("append")
    .save()
)
print("WRITTEN", flush=True)
spark.stop()
