"""What RocketMQ's orderly consumers of a group agree on, as pure functions: the averaged
allocation of queues among the group's clients (`AllocateMessageQueueAveragely`), and the JSON
bodies of HEART_BEAT (`HeartbeatData`), LOCK_BATCH_MQ / UNLOCK_BATCH_MQ (`LockBatchRequestBody`,
`UnlockBatchRequestBody`, `LockBatchResponseBody`) and GET_CONSUMER_LIST_BY_GROUP
(`GetConsumerListByGroupResponseBody`). No I/O."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from staticmq_spark.backends.rocketmq.wire import fastjson

# The broker name of a static topic's logic queues in every client-side MessageQueue
# (`TopicQueueMappingUtils.getMockBrokerName("__global__")`): the Java orderly consumer locks
# MessageQueue(topic, MOCK_BROKER, logicId) at the queue's leader.
MOCK_BROKER = "__syslo__global__"


def allocate_averagely(me: str, client_ids: Sequence[str], queues: Sequence[int]) -> list[int]:
    """The queues `me` consumes among `client_ids` (RocketMQ's `AllocateMessageQueueAveragely`
    after `RebalanceImpl` sorted both lists): the first `len(queues) % len(clients)` clients get
    one queue more, in contiguous runs. Empty when `me` is not (yet) among the clients."""
    cids = sorted(client_ids)
    mqs = sorted(queues)
    if not mqs or not cids or me not in cids:
        return []
    index = cids.index(me)
    n, m = len(mqs), len(cids)
    mod = n % m
    if n <= m:
        average = 1
    elif mod > 0 and index < mod:
        average = n // m + 1
    else:
        average = n // m
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, n - start)
    return mqs[start : start + max(count, 0)]


def heartbeat_body(client_id: str, group: str, topic: str, *, from_first: bool, sub_version: int) -> bytes:
    """HeartbeatData of a push-style consumer of `group` (what an orderly consumer sends): the
    brokers list it among the group's clients (GET_CONSUMER_LIST_BY_GROUP) and notify the others."""
    consumer = {
        "groupName": group,
        "consumeType": "CONSUME_PASSIVELY",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET" if from_first else "CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet": [
            {
                "classFilterMode": False,
                "topic": topic,
                "subString": "*",
                "tagsSet": [],
                "codeSet": [],
                "subVersion": sub_version,
                "expressionType": "TAG",
            }
        ],
        "unitMode": False,
    }
    body = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": [consumer]}
    return json.dumps(body).encode()


def _queues(topic: str, queue_ids: Iterable[int]) -> list[dict[str, Any]]:
    return [{"topic": topic, "brokerName": MOCK_BROKER, "queueId": q} for q in sorted(set(queue_ids))]


def lock_body(group: str, client_id: str, topic: str, queue_ids: Iterable[int]) -> bytes:
    """LockBatchRequestBody (also UnlockBatchRequestBody: the same fields) for logic queues."""
    body = {
        "consumerGroup": group,
        "clientId": client_id,
        "onlyThisBroker": False,
        "mqSet": _queues(topic, queue_ids),
    }
    return json.dumps(body).encode()


def locked_queues(body: bytes, topic: str) -> set[int]:
    """The logic queues of `topic` a LockBatchResponseBody says this client holds."""
    raw = fastjson.loads(body) if body else {}
    return {
        int(mq["queueId"])
        for mq in raw.get("lockOKMQSet") or []
        if mq.get("topic") == topic and mq.get("brokerName") == MOCK_BROKER
    }


def consumer_ids(body: bytes) -> list[str]:
    """The client ids of a GetConsumerListByGroupResponseBody."""
    raw = fastjson.loads(body) if body else {}
    return [str(c) for c in raw.get("consumerIdList") or []]
