"""startingOffsets=group: a query takes over a consumer group's committed offsets on a real cluster
(broker_stub and Apache RocketMQ)."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from staticmq_spark.client import PullConsumer
from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ
from tests.support.clusters_under_test import ClusterUnderTest, rocketmq_under_test
from tests.support.rocketmq_tools import compile_client
from tests.support.spark import available_now_rows, by_queue, new_topic, produce, source
from tests.support.static_helpers import read_queue

pytestmark = pytest.mark.spark
_n = itertools.count()
JAVA_CONSUMER = Path(__file__).parents[1] / "support" / "java" / "GroupConsumer.java"


def test_a_query_starting_from_a_group_reads_from_its_committed_offsets(spark, backend: ClusterUnderTest) -> None:
    """On both backends: the group's offsets committed by another consumer (on RocketMQ they are
    stored by the brokers, where a Java client's commits go too), in a topic remapped since."""
    topic = f"group-start-{backend.name}-{next(_n)}"
    backend.create(topic, 4, backend.brokers[:1])
    sent = produce(backend.address, topic, 200)
    backend.remap(topic, backend.brokers[1:2])
    more = produce(backend.address, topic, 200, start=200)
    committed = {0: 10, 2: len(sent[2]) + 3}  # another consumer of the group got this far; 1 and 3: nothing
    group = f"handover-{backend.name}-{next(_n)}"
    with PullConsumer(backend.address, group=group) as consumer:
        offsets = {q: _logic_offset(consumer, topic, q, n) for q, n in committed.items()}
        for q, offset in offsets.items():
            consumer.commit(topic, q, offset)
    df = source(spark, backend.address, topic, startingOffsets="group", group=group, maxMessagesPerTrigger="120")
    got = by_queue(available_now_rows(df, f"group_start_{backend.name}_{next(_n)}"))
    every = {queue: sent.get(queue, []) + more.get(queue, []) for queue in range(4)}
    expected = {queue: bodies[committed.get(queue, 0) :] for queue, bodies in every.items()}
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}


def _logic_offset(consumer: PullConsumer, topic: str, queue: int, nth: int) -> int:
    """The logic offset of the queue's `nth` message (0-based), across the remap's offset jump."""
    offsets = [o for o, _ in read_queue(consumer, topic, queue)]
    return offsets[nth]


def test_a_group_without_commits_fails_the_query_when_asked_to(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 10)
    df = source(spark, cluster.namesrv, topic, startingOffsets="group", group="nobody", groupMissingOffsets="fail")
    with pytest.raises(Exception, match="has no committed offset"):
        df.writeStream.format("memory").queryName("group_fail").trigger(availableNow=True).start().awaitTermination(120)


def test_a_query_takes_over_a_group_committed_by_rocketmqs_java_client(
    spark: SparkSession, rocketmq_cluster: LocalRocketMQ, tmp_path: Path
) -> None:
    """A consumer group moves from a Java application to a Spark job: RocketMQ's own push consumer
    (tests/support/java/GroupConsumer.java) consumes a static topic remapped since its creation and
    persists the group's offsets as it shuts down; a query with startingOffsets=group (every queue
    must have an offset) then reads exactly the messages sent after, none of those before."""
    backend = rocketmq_under_test(rocketmq_cluster)
    topic = f"java-group-{os.getpid()}-{next(_n)}"
    group = f"java-app-{os.getpid()}-{next(_n)}"
    backend.create(topic, 4, backend.brokers[:1])
    produce(backend.address, topic, 200)
    backend.remap(topic, backend.brokers[1:2])
    produce(backend.address, topic, 100, start=200)

    java = ["java", "-Xmx256m", "-cp", compile_client(JAVA_CONSUMER, tmp_path), "GroupConsumer"]
    consumed = subprocess.run(
        [*java, rocketmq_cluster.namesrv, topic, group, "300", "120"],  # 300 expected within 120 s
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env={**os.environ, "ROCKETMQ_HOME": str(tmp_path), "HOME": str(tmp_path)},
    )
    assert consumed.returncode == 0, consumed.stdout[-2000:] + consumed.stderr[-2000:]

    after = produce(backend.address, topic, 150, start=300)
    df = source(spark, backend.address, topic, startingOffsets="group", group=group, groupMissingOffsets="fail")
    assert by_queue(available_now_rows(df, f"java_group_{next(_n)}")) == after
