"""Where a topic lives, as RocketMQ answers it: the name server's route (masters, and for a static
topic each logic queue's leader by the newest mapping epoch) and a broker's mapping detail
(`TopicQueueMappingDetail`, its hosted logic queues' item chains). Pure parsing, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from staticmq_spark.backends.rocketmq.wire import fastjson
from staticmq_spark.errors import BrokerUnavailableError
from staticmq_spark.mapping import MappingItem, TopicQueueMapping


@dataclass(frozen=True, slots=True)
class TopicRoute:
    topic: str
    masters: dict[str, str]  # broker name -> master address
    total_queues: int  # 0 for a dynamic topic
    leaders: dict[int, str]  # logic queue -> broker name (static topics)
    epochs: dict[str, int] = field(default_factory=dict)

    @property
    def is_static(self) -> bool:
        return self.total_queues > 0

    def leader_addr(self, queue: int) -> tuple[str, str]:
        bname = self.leaders.get(queue)
        if bname is None or bname not in self.masters:
            raise BrokerUnavailableError(f"logic queue {queue} of {self.topic!r} has no live leader in the route")
        return bname, self.masters[bname]


def parse_route(topic: str, body: bytes) -> TopicRoute:
    raw = fastjson.loads(body)
    masters = {
        b["brokerName"]: b["brokerAddrs"]["0"] for b in raw.get("brokerDatas", []) if "0" in b.get("brokerAddrs", {})
    }
    infos = sorted((raw.get("topicQueueMappingByBroker") or {}).values(), key=lambda i: int(i.get("epoch", 0)))
    leaders: dict[int, str] = {}
    total = 0
    for info in infos:  # oldest epoch first: a newer epoch overwrites a stale leader
        total = max(total, int(info.get("totalQueues", 0)))
        for logic_id in info.get("currIdMap") or {}:
            leaders[int(logic_id)] = info["bname"]
    return TopicRoute(topic, masters, total, leaders, {i["bname"]: int(i.get("epoch", 0)) for i in infos})


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
