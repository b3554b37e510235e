"""RocketMQ's orderly-consumer agreements as pure functions: AllocateMessageQueueAveragely over
sorted client ids and sorted logic queues, and the JSON bodies of heartbeats, locks and the
consumer list (field names as in RocketMQ's HeartbeatData, LockBatchRequestBody,
LockBatchResponseBody and GetConsumerListByGroupResponseBody)."""

from __future__ import annotations

import json

import pytest

from staticmq_spark.backends.rocketmq.consumer_groups import (
    MOCK_BROKER,
    allocate_averagely,
    consumer_ids,
    heartbeat_body,
    lock_body,
    locked_queues,
)


def java_averagely(index: int, n: int, m: int) -> list[int]:
    """AllocateMessageQueueAveragely.allocate transcribed line by line (Java int division)."""
    mod = n % m
    average = 1 if n <= m else (n // m + 1 if mod > 0 and index < mod else n // m)
    start = index * average if mod > 0 and index < mod else index * average + mod
    return list(range(start, start + min(average, n - start)))


@pytest.mark.parametrize(("queues", "clients"), [(8, 3), (8, 2), (2, 3), (4, 4), (1, 5), (16, 5), (7, 7), (9, 1)])
def test_allocation_gives_every_queue_to_exactly_one_client_as_rocketmq_does(queues: int, clients: int) -> None:
    ids = [f"10.0.0.{i}@{100 + i}" for i in range(clients)]
    shares = {cid: allocate_averagely(cid, list(reversed(ids)), list(reversed(range(queues)))) for cid in ids}
    assert sorted(q for share in shares.values() for q in share) == list(range(queues))
    for index, cid in enumerate(sorted(ids)):
        assert shares[cid] == java_averagely(index, queues, clients)
    sizes = [len(s) for s in shares.values()]
    assert max(sizes) - min(sizes) <= 1


def test_allocation_of_eight_queues_to_three_clients_gives_the_first_two_one_more() -> None:
    ids = ["c", "a", "b"]
    assert [allocate_averagely(cid, ids, range(8)) for cid in ("a", "b", "c")] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_allocation_sorts_client_ids_as_java_strings_do() -> None:
    ids = ["127.0.0.1@9", "127.0.0.1@10", "staticmq@1@ab"]
    assert allocate_averagely("127.0.0.1@10", ids, range(3)) == [0]  # "1" < "9"
    assert allocate_averagely("127.0.0.1@9", ids, range(3)) == [1]


def test_a_client_not_yet_in_the_group_list_gets_nothing() -> None:
    assert allocate_averagely("me", ["a", "b"], range(4)) == []
    assert allocate_averagely("me", [], range(4)) == []
    assert allocate_averagely("me", ["me"], []) == []


def test_lock_body_names_logic_queues_under_the_mock_broker() -> None:
    body = json.loads(lock_body("g", "cid", "T", [2, 0, 2]))
    assert body == {
        "consumerGroup": "g",
        "clientId": "cid",
        "onlyThisBroker": False,
        "mqSet": [
            {"topic": "T", "brokerName": MOCK_BROKER, "queueId": 0},
            {"topic": "T", "brokerName": MOCK_BROKER, "queueId": 2},
        ],
    }
    assert MOCK_BROKER == "__syslo__global__"


def test_locked_queues_reads_the_lock_ok_set_of_this_topic_and_mock_broker_only() -> None:
    body = (
        b'{"lockOKMQSet":[{"brokerName":"__syslo__global__","queueId":3,"topic":"T"},'
        b'{"brokerName":"broker-a","queueId":1,"topic":"T"},{"brokerName":"__syslo__global__","queueId":0,"topic":"U"}]}'
    )
    assert locked_queues(body, "T") == {3}
    assert locked_queues(b'{"lockOKMQSet":[]}', "T") == set()
    assert locked_queues(b"", "T") == set()


def test_heartbeat_names_a_clustering_push_consumer_of_the_group_subscribed_to_the_topic() -> None:
    body = json.loads(heartbeat_body("cid", "g", "T", from_first=True, sub_version=7))
    assert body["clientID"] == "cid" and body["producerDataSet"] == []
    (consumer,) = body["consumerDataSet"]
    assert consumer["groupName"] == "g"
    assert (consumer["consumeType"], consumer["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
    assert consumer["consumeFromWhere"] == "CONSUME_FROM_FIRST_OFFSET"
    (sub,) = consumer["subscriptionDataSet"]
    assert (sub["topic"], sub["subString"], sub["expressionType"], sub["subVersion"]) == ("T", "*", "TAG", 7)
    latest = json.loads(heartbeat_body("cid", "g", "T", from_first=False, sub_version=7))
    assert latest["consumerDataSet"][0]["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"


def test_consumer_ids_reads_the_list_in_either_json_form() -> None:
    assert consumer_ids(b'{"consumerIdList":["b","a"]}') == ["b", "a"]
    assert consumer_ids(b"{}") == []
