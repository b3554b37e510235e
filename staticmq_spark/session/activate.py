"""`activate_in_thread`: `df.write` and `writeStream.start()` of `format("staticmq")` from a thread
other than the one that made the session.

    import threading
    from staticmq_spark import activate_in_thread

    def job() -> None:
        activate_in_thread(spark)  # first, in the thread that writes
        df.write.format("staticmq").option("namesrv", ns).option("topic", "out").mode("append").save()

    threading.Thread(target=job).start()

Why it is needed: a writer (`DataFrameWriter.save`, `DataStreamWriter.start`) goes from pyspark
straight to the JVM, whose `DataSource.lookupDataSource` finds a Python data source only through
`SparkSession.getActiveSession`: the *active session of the JVM thread*, an inheritable thread
local. Each Python thread talks to its own JVM thread (py4j's pinned threads), started by py4j's
server thread, which has no active session; the main thread has one because making a session (and
`spark.createDataFrame`) sets it. So, from a new thread, `df.write.format("staticmq")` fails with
`DATA_SOURCE_NOT_FOUND` before any staticmq code runs, while `spark.read.format("staticmq")` works
(the reader looks the name up in its own session). Measured on pyspark 4.0.0, 4.1.1, 4.2.0 and
4.3.0: the same on all four (tests/spark/test_threads.py). staticmq cannot do it for you: nothing
of it runs in the driver between `format("staticmq")` and the lookup.

What this adds over the one line it runs (`spark._jvm.SparkSession.setActiveSession(
spark._jsparkSession)`): no private attributes in your code, and it does nothing on a Spark Connect
session (which has no JVM here: the server runs each request in its session, from any thread), so
the same code runs on both.
"""

from __future__ import annotations

from typing import Any

from staticmq_spark.session.connect import is_connect_session


def activate_in_thread(session: Any) -> None:
    """Makes `session` the active session of the JVM thread that serves the calling Python
    thread, so that `df.write` / `writeStream.start()` with `format("staticmq")` find the data
    source there; does nothing on a Spark Connect session. Call it in each thread that writes
    (once per thread is enough; calling it again is harmless)."""
    if is_connect_session(session):
        return
    jvm = session._jvm
    # pyspark 4's own accessor (org.apache.spark.sql.classic.SparkSession); the API class before it
    accessor = getattr(type(session), "_get_j_spark_session_class", None)
    jvm_class = accessor(jvm) if callable(accessor) else jvm.SparkSession
    jvm_class.setActiveSession(session._jsparkSession)
