"""Bronze and gold Delta tables from a static topic (the example of docs/delta.md).

    python examples/delta_pipeline.py --namesrv 127.0.0.1:9876 --topic orders --lake /tmp/lake
Runs with Trigger.AvailableNow: lands what the topic holds now, prints the gold table, exits.
"""

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from staticmq_spark import configure_spark
from staticmq_spark.lakehouse import IdempotentMerge, start_bronze

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--namesrv", required=True)
parser.add_argument("--topic", required=True)
parser.add_argument("--lake", required=True)
args = parser.parse_args()

builder = SparkSession.builder.master("local[2]").config("spark.ui.showConsoleProgress", "false")
spark = configure_spark(builder, delta=True).getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
ns, lake = args.namesrv, args.lake

# Bronze: every message exactly once, with its topic, queueId, queueOffset, key, tags, value,
# properties, bornTimestamp and storeTimestamp.
start_bronze(spark, ns, args.topic, f"{lake}/bronze", f"{lake}/_ck/bronze", available_now=True).awaitTermination()

# Gold: messages per key, upserted by MERGE; a replayed micro-batch is not merged twice.
totals = IdempotentMerge(f"{lake}/gold", on=["key"], app_id="orders-gold", update={"n": "t.n + s.n"})


def to_gold(batch: DataFrame, batch_id: int) -> None:
    totals(batch.groupBy("key").agg(F.count(F.lit(1)).alias("n")), batch_id)


(
    spark.readStream.format("delta")
    .load(f"{lake}/bronze")
    .writeStream.foreachBatch(to_gold)
    .option("checkpointLocation", f"{lake}/_ck/gold")
    .trigger(availableNow=True)
    .start()
    .awaitTermination()
)
spark.read.format("delta").load(f"{lake}/gold").orderBy("key").show()
