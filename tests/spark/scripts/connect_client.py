"""A Spark Connect client of format("staticmq"): a batch read, an AvailableNow stream into the
staticmq sink, and a df.write, on a Spark Connect server.

    python connect_client.py sc://HOST:PORT NAMESRV INPUT STREAMED WRITTEN CHECKPOINT

Prints `READ <rows>` (rows the batch read of INPUT saw) and `DONE`. Runs as a process of its own:
a Connect session in the test process would switch pyspark there to Connect mode.
"""

import sys

from pyspark.sql import SparkSession

from staticmq_spark.session.connect import register_over_connect

url, namesrv, source_topic, streamed_topic, written_topic, checkpoint = sys.argv[1:7]
spark = SparkSession.builder.remote(url).getOrCreate()
# A Python data source is registered per session: the client sends the class to the server
# (spark.dataSource.register, which a Spark 4.0 server refuses with DATA_SOURCE_ALREADY_EXISTS when
# its own lookup registered the installed staticmq already: register_over_connect keeps that one)
register_over_connect(spark)

read = spark.read.format("staticmq").option("namesrv", namesrv).option("topic", source_topic).load()
print(f"READ {read.select('queueId', 'queueOffset', 'value').count()}", flush=True)

query = (
    spark.readStream.format("staticmq")
    .option("namesrv", namesrv)
    .option("topic", source_topic)
    .option("startingOffsets", "earliest")
    .option("maxMessagesPerTrigger", "100")
    .load()
    .select("key", "value")
    .writeStream.format("staticmq")
    .option("namesrv", namesrv)
    .option("topic", streamed_topic)
    .option("checkpointLocation", checkpoint)
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
if query.exception() is not None:
    raise SystemExit(f"the stream failed: {query.exception()}")

rows = [(f"k{i % 7}", f"w{i}") for i in range(120)]
frame = spark.createDataFrame(rows, "key string, value string")
frame.write.format("staticmq").option("namesrv", namesrv).option("topic", written_topic).mode("append").save()
print("DONE", flush=True)
spark.stop()
