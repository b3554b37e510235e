"""The admin request codes of RocketMQ's remoting protocol that `mqadmin` uses to create, remap and
delete static topics, one method each (the rest of the client API is remoting.RemotingClient)."""

from __future__ import annotations

import json
import re

from staticmq_spark.backends.rocketmq.static_topics import BrokerTopic, detail_json
from staticmq_spark.backends.rocketmq.wire import fastjson
from staticmq_spark.backends.rocketmq.wire.codes import RequestCode, ResponseCode
from staticmq_spark.backends.rocketmq.wire.frames import FrameError
from staticmq_spark.backends.rocketmq.wire.remoting import RemotingClient, check_answer

DEFAULT_TOPIC = "TBW102"  # the createTopicKey mqadmin sends

# One entry of a TopicStatsTable as fastjson writes it: a MessageQueue object as the map key,
# `{"brokerName":"b","queueId":0,"topic":"t"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}`.
_STATS_ENTRY = re.compile(rb'\{[^{}]*"queueId":(\d+)[^{}]*\}:(\{[^{}]*\})')


def topic_stats_table(body: bytes) -> dict[int, tuple[int, int, int]]:
    """A TopicStatsTable body: queue id -> (min offset, max offset, last update timestamp)."""
    found = {}
    for queue, offsets in _STATS_ENTRY.findall(body):
        o = json.loads(offsets)
        found[int(queue)] = (
            int(o.get("minOffset", 0)),
            int(o.get("maxOffset", 0)),
            int(o.get("lastUpdateTimestamp", 0)),
        )
    if not found and b"queueId" in body:
        raise FrameError(f"RocketMQ sent a topic stats table this client cannot read: {body[:200]!r}")
    return found


class AdminCalls:
    def __init__(self, client: RemotingClient) -> None:
        self.client = client

    def clusters(self) -> dict[str, list[str]]:
        """Cluster name -> its broker names (GET_BROKER_CLUSTER_INFO's clusterAddrTable)."""
        resp = self.client.namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO, {})
        check_answer(resp, "cluster info")
        table = fastjson.loads(resp.body).get("clusterAddrTable", {}) or {}
        return {str(c): sorted(str(b) for b in brokers) for c, brokers in table.items()}

    def subscription_groups(self, addr: str) -> set[str]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the names of the groups one broker knows."""
        resp = self.client.call(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
        check_answer(resp, f"subscription groups at {addr}")
        return {str(g) for g in (fastjson.loads(resp.body).get("subscriptionGroupTable") or {})}

    def consumer_offsets(self, addr: str) -> dict[str, set[str]]:
        """GET_ALL_CONSUMER_OFFSET: group -> the topics it committed offsets of on one broker."""
        resp = self.client.call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET, {})
        check_answer(resp, f"consumer offsets at {addr}")
        found: dict[str, set[str]] = {}
        for key in fastjson.loads(resp.body).get("offsetTable") or {}:
            topic, _, group = str(key).rpartition("@")
            if topic and group:
                found.setdefault(group, set()).add(topic)
        return found

    def topic_stats(self, addr: str, topic: str) -> dict[int, tuple[int, int, int]] | None:
        """GET_TOPIC_STATS_INFO: (min offset, max offset, store time of the newest message or 0) of
        each physical queue of `topic` on one broker (queues 0..max(read, write)-1), None when the
        broker has no such topic."""
        resp = self.client.call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
        if resp.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        check_answer(resp, f"topic stats of {topic!r} at {addr}")
        return topic_stats_table(resp.body)

    def update_static_topic(self, addr: str, broker: BrokerTopic) -> None:
        """UPDATE_AND_CREATE_STATIC_TOPIC: the broker's topic config (header) and mapping detail (body)."""
        cfg = broker.config
        header: dict[str, object] = {
            "topic": cfg.name,
            "defaultTopic": DEFAULT_TOPIC,
            "readQueueNums": cfg.read_queues,
            "writeQueueNums": cfg.write_queues,
            "perm": cfg.perm,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": bool(cfg.order),
            "force": False,
        }
        resp = self.client.call(addr, RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC, header, detail_json(broker.detail))
        check_answer(resp, f"static topic {cfg.name!r} on {broker.detail.bname}")

    def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        check_answer(
            self.client.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}), f"deletion of {topic!r}"
        )

    def delete_topic_in_namesrvs(self, topic: str) -> None:
        for addr in self.client.namesrv:
            resp = self.client.call(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
            check_answer(resp, f"deletion of {topic!r} from the name server {addr}")
