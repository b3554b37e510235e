"""A bronze job for the driver-kill test: staticmq -> Delta with a checkpoint.

    python stream_to_delta.py NAMESRV TOPIC TABLE CHECKPOINT run|finish
run: keep streaming (until killed); finish: Trigger.AvailableNow, then exit.
"""

import sys

from pyspark.sql import SparkSession

from staticmq_spark import configure_spark
from staticmq_spark.lakehouse import start_bronze

namesrv, topic, table, checkpoint, mode = sys.argv[1:6]
builder = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
spark = configure_spark(builder.config("spark.sql.shuffle.partitions", "2"), delta=True).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
query = start_bronze(
    spark,
    namesrv,
    topic,
    table,
    checkpoint,
    available_now=mode == "finish",
    trigger_interval="300 milliseconds",
    maxMessagesPerTrigger="300",
)
print("STREAMING", flush=True)
query.awaitTermination()
