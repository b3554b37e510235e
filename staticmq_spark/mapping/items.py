"""Mapping items and the TopicQueueMapping (the source of truth), with their JSON form.

A logic queue is a chain of items, oldest first. Item i maps logic offsets from `logic_offset`
on to physical queue `bname/queue` from physical offset `start_offset`:

    logic = physical + offset_delta        offset_delta = logic_offset - start_offset

`end_offset` is exclusive and -1 while the item leads (its queue is still written). The newest
item is the leader; only it may have logic_offset -1 (undecided: writable, never readable).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from staticmq_spark.errors import MappingRejectedError

UNDECIDED = -1
MAPPING_VERSION = "1"


@dataclass(frozen=True, slots=True)
class MappingItem:
    queue: int  # physical queue id on bname
    bname: str
    gen: int
    logic_offset: int  # UNDECIDED (-1) while the leader's offsets are not settled
    start_offset: int = 0
    end_offset: int = -1  # exclusive; -1 while this item leads
    time_of_start: int = -1
    time_of_end: int = -1
    update_time: int = 0

    @property
    def decided(self) -> bool:
        return self.logic_offset != UNDECIDED

    @property
    def offset_delta(self) -> int:
        if not self.decided:
            raise MappingRejectedError(
                f"item {self.bname}/{self.queue} gen {self.gen} has no logic offset yet: "
                "no logic offset can be computed from it"
            )
        return self.logic_offset - self.start_offset

    def to_logic(self, physical: int) -> int:
        return physical + self.offset_delta

    def to_physical(self, logic: int) -> int:
        return logic - self.offset_delta

    def logic_end(self, physical_max: int | None = None) -> int:
        """Exclusive logic end: from end_offset when fenced, else from the given physical max."""
        end = self.end_offset if self.end_offset >= 0 else physical_max
        if end is None:
            raise MappingRejectedError(f"item {self.bname}/{self.queue} gen {self.gen} still leads: its end is open")
        return self.to_logic(end)

    def same_segment(self, other: MappingItem) -> bool:
        return (self.bname, self.queue, self.gen) == (other.bname, other.queue, other.gen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "bname": self.bname,
            "gen": self.gen,
            "logicOffset": self.logic_offset,
            "startOffset": self.start_offset,
            "endOffset": self.end_offset,
            "timeOfStart": self.time_of_start,
            "timeOfEnd": self.time_of_end,
            "updateTime": self.update_time,
        }

    @staticmethod
    def from_dict(raw: dict[str, Any]) -> MappingItem:
        try:
            return MappingItem(
                queue=int(raw["queue"]),
                bname=str(raw["bname"]),
                gen=int(raw["gen"]),
                logic_offset=int(raw["logicOffset"]),
                start_offset=int(raw.get("startOffset", 0)),
                end_offset=int(raw.get("endOffset", -1)),
                time_of_start=int(raw.get("timeOfStart", -1)),
                time_of_end=int(raw.get("timeOfEnd", -1)),
                update_time=int(raw.get("updateTime", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MappingRejectedError(f"malformed mapping item {raw!r}: {exc!r}") from None


Chain = tuple[MappingItem, ...]


@dataclass(frozen=True, slots=True)
class TopicQueueMapping:
    """One broker's copy of a static topic's mapping (`bname` names that broker)."""

    topic: str
    bname: str
    epoch: int
    total_queues: int
    hosted: dict[int, Chain] = field(default_factory=dict)
    version: str = MAPPING_VERSION

    def leads(self, logic_queue: int) -> bool:
        chain = self.hosted.get(logic_queue)
        return chain is not None and len(chain) > 0 and chain[-1].bname == self.bname

    def led_queues(self) -> list[int]:
        return sorted(q for q in self.hosted if self.leads(q))

    def with_chains(self, epoch: int, hosted: dict[int, Chain]) -> TopicQueueMapping:
        return replace(self, epoch=epoch, hosted=dict(hosted))

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "topic": self.topic,
                "bname": self.bname,
                "epoch": self.epoch,
                "totalQueues": self.total_queues,
                "hostedQueues": {str(q): [i.to_dict() for i in chain] for q, chain in sorted(self.hosted.items())},
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str | bytes) -> TopicQueueMapping:
        try:
            raw = json.loads(text)
            hosted = {
                int(q): tuple(MappingItem.from_dict(i) for i in items) for q, items in raw["hostedQueues"].items()
            }
            return TopicQueueMapping(
                topic=str(raw["topic"]),
                bname=str(raw["bname"]),
                epoch=int(raw["epoch"]),
                total_queues=int(raw["totalQueues"]),
                hosted=hosted,
                version=str(raw.get("version", MAPPING_VERSION)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MappingRejectedError(f"malformed TopicQueueMapping: {exc!r}") from None
