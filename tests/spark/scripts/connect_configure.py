"""A Spark Connect client's `configure_spark`, and writes from threads, one mode per run:

    python connect_configure.py configure sc://HOST:PORT NAMESRV INPUT WRITTEN
        configure_spark(SparkSession.builder.remote(URL)).getOrCreate(), a batch read of INPUT
        (prints `READ <rows>`), then 120 rows written to WRITTEN from a new thread
    python connect_configure.py threads sc://HOST:PORT NAMESRV WRITTEN
        the data source registered without configure_spark; 120 rows written to WRITTEN from a new thread without
        anything else, 120 more from another after activate_in_thread (a no-op over Connect)
    python connect_configure.py delta-remote sc://HOST:PORT
        configure_spark(..., delta=True) on a running server: prints `REFUSED <message>`
    python connect_configure.py delta-local NAMESRV INPUT LAKE
        configure_spark(SparkSession.builder.remote("local[1]"), delta=True): pyspark starts the
        Connect server here with Delta; INPUT read into a Delta table at LAKE (prints `DELTA <rows>`)

Prints `DONE` at the end. Runs as a process of its own: a Connect session in the test process would
switch pyspark there to Connect mode.
"""

import sys
import threading
import time

from pyspark.sql import SparkSession

from staticmq_spark import activate_in_thread, configure_spark
from staticmq_spark.errors import UnsupportedOperationError

mode = sys.argv[1]


def write_in_thread(spark: SparkSession, namesrv: str, topic: str, tag: str, fix: bool) -> None:
    failed: list[BaseException] = []

    def body() -> None:
        try:
            if fix:
                activate_in_thread(spark)
            frame = spark.range(120).selectExpr("concat('k', id % 7) AS key", f"concat('{tag}', id) AS value")
            frame.write.format("staticmq").option("namesrv", namesrv).option("topic", topic).mode("append").save()
        except BaseException as error:
            failed.append(error)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(300)
    if thread.is_alive() or failed:
        raise SystemExit(f"the write from a thread failed: {failed or 'still running after 300 s'}")


if mode == "configure":
    url, namesrv, source_topic, written_topic = sys.argv[2:6]
    spark = configure_spark(SparkSession.builder.remote(url)).getOrCreate()
    read = spark.read.format("staticmq").option("namesrv", namesrv).option("topic", source_topic).load()
    print(f"READ {read.select('queueId', 'queueOffset', 'value').count()}", flush=True)
    write_in_thread(spark, namesrv, written_topic, "c", fix=False)
elif mode == "threads":
    from staticmq_spark.session.connect import register_over_connect

    url, namesrv, written_topic = sys.argv[2:5]
    spark = register_over_connect(SparkSession.builder.remote(url).getOrCreate())
    write_in_thread(spark, namesrv, written_topic, "a", fix=False)
    write_in_thread(spark, namesrv, written_topic, "b", fix=True)
elif mode == "delta-remote":
    url = sys.argv[2]
    started = time.monotonic()
    try:
        configure_spark(SparkSession.builder.remote(url), delta=True)
    except UnsupportedOperationError as error:
        print(f"REFUSED {error}", flush=True)
        print(f"SECONDS {time.monotonic() - started:.3f}", flush=True)
    else:
        raise SystemExit("configure_spark(delta=True) accepted a running Spark Connect server")
    spark = None
elif mode == "delta-local":
    namesrv, source_topic, lake = sys.argv[2:5]
    builder = SparkSession.builder.remote("local[1]").config("spark.ui.enabled", "false")
    spark = configure_spark(builder, delta=True).getOrCreate()
    rows = spark.read.format("staticmq").option("namesrv", namesrv).option("topic", source_topic).load()
    rows.select("queueId", "queueOffset", "value").write.format("delta").save(lake)
    print(f"DELTA {spark.read.format('delta').load(lake).count()}", flush=True)
else:
    raise SystemExit(f"unknown mode {mode!r}")

print("DONE", flush=True)
if spark is not None:
    spark.stop()
