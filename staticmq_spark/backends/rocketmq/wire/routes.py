"""Where a topic lives, as RocketMQ answers it: the name server's route (every broker's addresses by
broker id, each broker's queue data, and for a static topic each logic queue's leader by the newest
mapping epoch), the cluster's broker table, and a broker's mapping detail
(`TopicQueueMappingDetail`, its hosted logic queues' item chains). Pure parsing, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from staticmq_spark.backends.rocketmq.wire import fastjson
from staticmq_spark.errors import BrokerUnavailableError
from staticmq_spark.mapping import MappingItem, TopicQueueMapping

MASTER_ID = 0  # RocketMQ's broker id of a group's master (MixAll.MASTER_ID)


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's queues of a topic, as the name server has them (RocketMQ's QueueData)."""

    read_queues: int
    write_queues: int
    perm: int


@dataclass(frozen=True, slots=True)
class TopicRoute:
    topic: str
    masters: dict[str, str]  # broker name -> master address
    total_queues: int  # 0 for a dynamic topic
    leaders: dict[int, str]  # logic queue -> broker name (static topics)
    epochs: dict[str, int] = field(default_factory=dict)
    # broker name -> broker id -> address: every replica the name server knows (id 0 the master)
    addresses: dict[str, dict[int, str]] = field(default_factory=dict)
    queues: dict[str, QueueData] = field(default_factory=dict)  # broker name -> its queues of the topic

    @property
    def is_static(self) -> bool:
        return self.total_queues > 0

    def leader_addr(self, queue: int) -> tuple[str, str]:
        bname = self.leaders.get(queue)
        if bname is None or bname not in self.masters:
            raise BrokerUnavailableError(f"logic queue {queue} of {self.topic!r} has no live leader in the route")
        return bname, self.masters[bname]


def broker_addresses(broker_datas: Any) -> dict[str, dict[int, str]]:
    """RocketMQ's BrokerData list (or brokerAddrTable values): broker name -> broker id -> address."""
    return {
        str(b["brokerName"]): {int(i): str(a) for i, a in (b.get("brokerAddrs") or {}).items()} for b in broker_datas
    }


def masters_of(addresses: dict[str, dict[int, str]]) -> dict[str, str]:
    """Broker name -> master address, for the brokers whose master is registered."""
    return {name: ids[MASTER_ID] for name, ids in addresses.items() if MASTER_ID in ids}


def parse_cluster(body: bytes) -> dict[str, dict[int, str]]:
    """GET_BROKER_CLUSTER_INFO's body: every broker name -> broker id -> address."""
    return broker_addresses((fastjson.loads(body).get("brokerAddrTable") or {}).values())


def parse_route(topic: str, body: bytes) -> TopicRoute:
    raw = fastjson.loads(body)
    addresses = broker_addresses(raw.get("brokerDatas") or [])
    queues = {
        str(q["brokerName"]): QueueData(
            int(q.get("readQueueNums", 0)), int(q.get("writeQueueNums", 0)), int(q.get("perm", 6))
        )
        for q in raw.get("queueDatas") or []
    }
    infos = sorted((raw.get("topicQueueMappingByBroker") or {}).values(), key=lambda i: int(i.get("epoch", 0)))
    leaders: dict[int, str] = {}
    total = 0
    for info in infos:  # oldest epoch first: a newer epoch overwrites a stale leader
        total = max(total, int(info.get("totalQueues", 0)))
        for logic_id in info.get("currIdMap") or {}:
            leaders[int(logic_id)] = info["bname"]
    epochs = {i["bname"]: int(i.get("epoch", 0)) for i in infos}
    return TopicRoute(topic, masters_of(addresses), total, leaders, epochs, addresses, queues)


def parse_mapping_detail(topic: str, detail: dict[str, Any]) -> TopicQueueMapping:
    hosted = {
        int(q): tuple(
            MappingItem(
                queue=int(i["queueId"]),
                bname=str(i["bname"]),
                gen=int(i.get("gen", 0)),
                logic_offset=int(i.get("logicOffset", -1)),
                start_offset=int(i.get("startOffset", 0)),
                end_offset=int(i.get("endOffset", -1)),
                time_of_start=int(i.get("timeOfStart", -1)),
                time_of_end=int(i.get("timeOfEnd", -1)),
            )
            for i in items
        )
        for q, items in (detail.get("hostedQueues") or {}).items()
    }
    return TopicQueueMapping(
        topic=topic,
        bname=str(detail["bname"]),
        epoch=int(detail.get("epoch", 0)),
        total_queues=int(detail.get("totalQueues", 0)),
        hosted=hosted,
    )
