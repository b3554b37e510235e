"""A streaming job for the driver-kill test: staticmq -> parquet with a checkpoint.

    python stream_to_parquet.py NAMESRV TOPIC OUTPUT CHECKPOINT run|finish
run: keep streaming (until killed); finish: Trigger.AvailableNow, then exit.
"""

import sys

from pyspark.sql import SparkSession

namesrv, topic, output, checkpoint, mode = sys.argv[1:6]
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
df = (
    spark.readStream.format("staticmq")
    .option("namesrv", namesrv)
    .option("topic", topic)
    .option("startingOffsets", "earliest")
    .option("maxMessagesPerTrigger", "200")
    .load()
    .select("queueId", "queueOffset", "value")
)
writer = df.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
if mode == "finish":
    writer.trigger(availableNow=True).start().awaitTermination()
else:
    print("STREAMING", flush=True)
    writer.trigger(processingTime="200 milliseconds").start().awaitTermination()
