"""The spark-submit job of the standalone-cluster tests: two streaming queries of one static topic
side by side (both Trigger.AvailableNow), as a pipeline runs them: `bronze` lands every message in
a Delta table, `results` writes every message back, keyed as it came, to another static topic
through the staticmq sink.

    spark-submit --master spark://HOST:PORT --jars DELTA_JARS --conf ... cluster_job.py \\
        NAMESRV INPUT OUTPUT TABLE CHECKPOINTS MARKERS [--block read] [--block write] [--per-trigger N]

Both queries pass `value` through the Python UDF `mark` (phase `read` in bronze, `write` in
results), which runs in the executors' Python workers. For every task attempt it leaves a file in
MARKERS named `<phase>-s<stage>-p<partition>-a<attempt>-<pid>` holding the Python worker's working
directory (the executor's directory in its worker's work dir: which worker ran it) and, on a
second line, the file staticmq_spark was imported from there (an installed package, or the wheel
shipped with `--py-files`). With
`--block read` (`write`), the first task attempt of that phase to reach row BLOCK_AT claims
`MARKERS/blocked-<phase>` (holding `<pid> <stage> <partition> <attempt>`) and stops there, in the
middle of its read (of its sink write: rows staged on the brokers already, more to come), until
its executor is killed; every other attempt, the retry included, runs through. The master is not
set here: it is spark-submit's.
"""

import argparse
import os
import threading
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.functions import col, lit, udf

from staticmq_spark.data_source import StaticMQDataSource
from staticmq_spark.lakehouse import BRONZE_COLUMNS

BLOCK_AT = 60  # rows of a task attempt before it stops (later pulls and writes are still to come)
NOT_KILLED_S = 300.0  # a blocked attempt that outlives this fails its task (the test failed to kill it)

parser = argparse.ArgumentParser()
for name in ("namesrv", "input", "output", "table", "checkpoints", "markers"):
    parser.add_argument(name)
parser.add_argument("--block", choices=["read", "write"], action="append", default=[])
parser.add_argument("--per-trigger", default="100000", help="maxMessagesPerTrigger of the source")
args = parser.parse_args()
markers, blocks = args.markers, set(args.block)
_rows: dict[int, int] = {}

spark = SparkSession.builder.appName("staticmq-cluster-job").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
spark.dataSource.register(StaticMQDataSource)


@udf("binary")
def mark(value, phase):  # no type hints: they would make it a pandas UDF candidate (a warning)
    ctx = TaskContext.get()
    attempt = ctx.taskAttemptId()
    n = _rows[attempt] = _rows.get(attempt, 0) + 1
    if n == 1:
        name = f"{phase}-s{ctx.stageId()}-p{ctx.partitionId()}-a{ctx.attemptNumber()}-{os.getpid()}"
        import staticmq_spark  # where the executor's Python finds the package

        Path(markers, name).write_text(f"{os.getcwd()}\n{staticmq_spark.__file__}")
    if phase in blocks and n == BLOCK_AT:
        try:
            fd = os.open(os.path.join(markers, f"blocked-{phase}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return value  # another attempt was the one to block
        os.write(fd, f"{os.getpid()} {ctx.stageId()} {ctx.partitionId()} {ctx.attemptNumber()}".encode())
        os.close(fd)
        threading.Event().wait(NOT_KILLED_S)  # stopped mid-task until the test kills this executor
        raise RuntimeError(f"task attempt {attempt} blocked in its {phase} and was not killed")
    return value


def read(phase: str):  # type: ignore[no-untyped-def]
    """The input topic, every row through `mark` in this phase."""
    return (
        spark.readStream.format("staticmq")
        .option("namesrv", args.namesrv)
        .option("topic", args.input)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", args.per_trigger)
        .option("pullBatchSize", "20")  # several pulls per task: a kill lands between two of them
        .load()
        .withColumn("value", mark(col("value"), lit(phase)))
    )


bronze = (
    read("read")
    .select(*BRONZE_COLUMNS)
    .writeStream.format("delta")
    .option("checkpointLocation", f"{args.checkpoints}/bronze")
    .trigger(availableNow=True)
    .start(args.table)
)
results = (
    read("write")
    .select("key", "value")
    .writeStream.format("staticmq")
    .option("namesrv", args.namesrv)
    .option("topic", args.output)
    .option("requestBytes", "512")  # rows staged on the brokers as they come, not at the task's end
    .option("checkpointLocation", f"{args.checkpoints}/sink")
    .trigger(availableNow=True)
    .start()
)
bronze.awaitTermination()
results.awaitTermination()
print(f"DONE {spark.sparkContext.applicationId}", flush=True)
spark.stop()
