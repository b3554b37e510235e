"""`df.write` and `writeStream.start()` of `format("staticmq")` from a thread other than the one that
made the session: where pyspark fails there (`DATA_SOURCE_NOT_FOUND`: a writer finds a Python data
source only through the JVM thread's active session, which a new thread lacks), and the fix, run in
the thread first: `staticmq_spark.activate_in_thread(spark)`, or the one line it runs,
`spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)`.

Whether a plain thread fails is a property of the running Spark that no pyspark API reveals (the
lookup is in the JVM), so `PLAIN_THREAD_FAILS` records it per pyspark major.minor as measured; the
tests check that the running pyspark still does what its row says, and a version without a row
is reported (skipped with what it did) instead of failing. Every attempt runs in a fresh
`threading.Thread`: py4j gives each Python thread a JVM thread of its own, so nothing an earlier
test set on a thread can leak in, and each test checks that its thread starts with no active JVM
session where its row says so.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyspark
import pytest
from pyspark.sql import DataFrame, SparkSession

from staticmq_spark import activate_in_thread
from tests.support.spark import new_topic, produce, source

pytestmark = pytest.mark.spark

# pyspark major.minor -> whether df.write / writeStream.start() of format("staticmq") from a new
# thread fails with DATA_SOURCE_NOT_FOUND (measured 2026-11-27 on 4.0.0, 4.1.1, 4.2.0 and 4.3.0)
PLAIN_THREAD_FAILS = {"4.0": True, "4.1": True, "4.2": True, "4.3": True}
VERSION = ".".join(pyspark.__version__.split(".")[:2])
NOT_FOUND = "DATA_SOURCE_NOT_FOUND"
ROWS = 120


def in_fresh_thread(body: Callable[[], Any], timeout_s: float = 300) -> Any:
    """`body()` in a new thread; returns what it returned, or the exception it raised."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(body())
        except BaseException as error:  # handed to the test, which judges it
            outcome.append(error)

    thread = threading.Thread(target=run, name="staticmq-write-thread")
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"the thread did not finish within {timeout_s} s"
    return outcome[0]


def thread_has_active_session(spark: SparkSession) -> bool:
    """Whether the JVM thread serving the calling Python thread has an active session."""
    jvm_class = type(spark)._get_j_spark_session_class(spark._jvm)  # type: ignore[attr-defined]
    return bool(jvm_class.getActiveSession().isDefined())


def one_line_fix(spark: SparkSession) -> None:
    spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[union-attr]


def rows_frame(spark: SparkSession, tag: str) -> DataFrame:
    """ROWS keyed rows; made with spark.range, which leaves the thread's active session alone
    (spark.createDataFrame would set it: see the last test)."""
    return spark.range(ROWS).selectExpr("concat('k', id % 7) AS key", f"concat('{tag}', id) AS value")


def expected(tag: str) -> Counter[tuple[str, str]]:
    return Counter((f"k{i % 7}", f"{tag}{i}") for i in range(ROWS))


def write(df: DataFrame, namesrv: str, topic: str) -> None:
    df.write.format("staticmq").option("namesrv", namesrv).option("topic", topic).mode("append").save()


def start_stream(spark: SparkSession, namesrv: str, source_topic: str, sink_topic: str, checkpoint: Path) -> Any:
    """An AvailableNow query from `source_topic` into `sink_topic`, run to its end."""
    query = (
        source(spark, namesrv, source_topic, startingOffsets="earliest")
        .select("key", "value")
        .writeStream.format("staticmq")
        .option("namesrv", namesrv)
        .option("topic", sink_topic)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert not query.isActive, "the AvailableNow query did not finish within 240 s"
    return query.exception()


def written(spark: SparkSession, namesrv: str, topic: str) -> Counter[tuple[str, str]]:
    frame = spark.read.format("staticmq").option("namesrv", namesrv).option("topic", topic).load()
    return Counter((r["key"], bytes(r["value"]).decode()) for r in frame.select("key", "value").collect())


def streamed(spark: SparkSession, namesrv: str, topic: str) -> Counter[bytes]:
    frame = spark.read.format("staticmq").option("namesrv", namesrv).option("topic", topic).load()
    return Counter(bytes(r["value"]) for r in frame.select("value").collect())


def sent(bodies: dict[int, list[bytes]]) -> Counter[bytes]:
    return Counter(body for queue in bodies.values() for body in queue)


def assert_not_found(outcome: Any, what: str) -> None:
    assert isinstance(outcome, Exception), f"{what} from a plain thread worked on pyspark {pyspark.__version__}"
    assert NOT_FOUND in str(outcome), f"{what}: {str(outcome)[:2000]}"


def test_a_plain_thread_writes_and_starts_a_staticmq_stream_as_the_version_table_says(
    spark: SparkSession, cluster: Any, tmp_path: Path
) -> None:
    ns = cluster.namesrv
    batch_topic, source_topic, sink_topic = (new_topic(ns, 4) for _ in range(3))
    bodies = produce(ns, source_topic, 300)

    def plain_write() -> tuple[bool, Any]:
        active = thread_has_active_session(spark)
        try:
            write(rows_frame(spark, "p"), ns, batch_topic)
        except Exception as error:
            return active, error
        return active, None

    def plain_stream() -> tuple[bool, Any]:
        active = thread_has_active_session(spark)
        try:
            return active, start_stream(spark, ns, source_topic, sink_topic, tmp_path / "ck")
        except Exception as error:
            return active, error

    write_active, write_error = in_fresh_thread(plain_write)
    stream_active, stream_error = in_fresh_thread(plain_stream)
    fails = PLAIN_THREAD_FAILS.get(VERSION)
    if fails is None:
        pytest.skip(
            f"pyspark {pyspark.__version__} has no row in PLAIN_THREAD_FAILS: from a plain thread "
            f"df.write gave {write_error!r:.300}, writeStream.start() {stream_error!r:.300}; "
            f"the thread had an active JVM session: {write_active}, {stream_active}"
        )
    if fails:
        assert not write_active and not stream_active, "a fresh thread started with an active JVM session"
        assert_not_found(write_error, "df.write.format('staticmq').save()")
        assert_not_found(stream_error, "writeStream.format('staticmq').start()")
        assert written(spark, ns, batch_topic) == Counter()
        assert streamed(spark, ns, sink_topic) == Counter()
    else:
        assert write_error is None and stream_error is None, (write_error, stream_error)
        assert written(spark, ns, batch_topic) == expected("p")
        assert streamed(spark, ns, sink_topic) == sent(bodies)


@pytest.mark.parametrize("fix", ["activate_in_thread", "one_line"])
def test_after_the_fix_a_threads_write_and_stream_land_every_row_exactly_once(
    spark: SparkSession, cluster: Any, tmp_path: Path, fix: str
) -> None:
    ns = cluster.namesrv
    batch_topic, source_topic, sink_topic = (new_topic(ns, 4) for _ in range(3))
    bodies = produce(ns, source_topic, 300)
    apply_fix = activate_in_thread if fix == "activate_in_thread" else one_line_fix
    fails = PLAIN_THREAD_FAILS.get(VERSION, False)

    def fixed_write() -> None:
        if fails:  # the same thread, before the fix: the failure the fix is for
            assert not thread_has_active_session(spark)
            with pytest.raises(Exception, match=NOT_FOUND):
                write(rows_frame(spark, "f"), ns, batch_topic)
        apply_fix(spark)
        assert thread_has_active_session(spark)
        write(rows_frame(spark, "f"), ns, batch_topic)

    def fixed_stream() -> Any:
        if fails:
            with pytest.raises(Exception, match=NOT_FOUND):
                start_stream(spark, ns, source_topic, sink_topic, tmp_path / "ck")
        apply_fix(spark)
        return start_stream(spark, ns, source_topic, sink_topic, tmp_path / "ck")

    outcome = in_fresh_thread(fixed_write)
    assert outcome is None, outcome
    outcome = in_fresh_thread(fixed_stream)
    assert outcome is None, outcome
    assert written(spark, ns, batch_topic) == expected("f")
    assert streamed(spark, ns, sink_topic) == sent(bodies)


def test_a_thread_that_calls_create_data_frame_first_writes_without_the_fix(spark: SparkSession, cluster: Any) -> None:
    """Why some threads work without the fix: pyspark's createDataFrame makes its session the
    thread's active JVM session (`SparkSession.setActiveSession` in pyspark/sql/session.py)."""
    ns = cluster.namesrv
    topic = new_topic(ns, 4)
    rows = [(f"k{i % 7}", f"c{i}") for i in range(ROWS)]

    def body() -> bool:
        before = thread_has_active_session(spark)
        write(spark.createDataFrame(rows, "key string, value string"), ns, topic)
        return before

    outcome = in_fresh_thread(body)
    assert not isinstance(outcome, BaseException), outcome
    if PLAIN_THREAD_FAILS.get(VERSION):
        assert outcome is False, "the thread had an active JVM session before createDataFrame"
    assert written(spark, ns, topic) == expected("c")
