"""startingOffsets=group: a query takes over a consumer group's committed offsets on a real cluster."""

from __future__ import annotations

import pytest

from staticmq_spark.client import PullConsumer
from tests.support.spark import by_queue, new_topic, produce, source

pytestmark = pytest.mark.spark


def test_a_query_starting_from_a_group_reads_from_its_committed_offsets(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 4)
    sent = produce(cluster.namesrv, topic, 400)
    committed = {0: 10, 2: len(sent[2])}  # another consumer of the group got this far; 1 and 3: nothing
    with PullConsumer(cluster.namesrv, group="handover") as consumer:
        for q, offset in committed.items():
            consumer.commit(topic, q, offset)
    q = (
        source(spark, cluster.namesrv, topic, startingOffsets="group", group="handover", maxMessagesPerTrigger="120")
        .writeStream.format("memory")
        .queryName("group_start")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(180)
    got = by_queue(spark.table("group_start").collect())
    expected = {queue: bodies[committed.get(queue, 0) :] for queue, bodies in sent.items()}
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in expected.items() if v}


def test_a_group_without_commits_fails_the_query_when_asked_to(spark, cluster) -> None:
    topic = new_topic(cluster.namesrv, 2)
    produce(cluster.namesrv, topic, 10)
    df = source(spark, cluster.namesrv, topic, startingOffsets="group", group="nobody", groupMissingOffsets="fail")
    with pytest.raises(Exception, match="has no committed offset"):
        df.writeStream.format("memory").queryName("group_fail").trigger(availableNow=True).start().awaitTermination(120)
