"""Pure views of a static topic as the brokers hold it: each broker's state, a logic queue's bounds
and lag from its segments' physical bounds, and the consistency check over live brokers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from staticmq_spark.errors import StaticTopicRefusedError
from staticmq_spark.mapping.consistency import ConsistencyReport, check_consistency
from staticmq_spark.mapping.items import Chain, TopicQueueMapping
from staticmq_spark.protocol.topics.config import TopicConfig


@dataclass(frozen=True, slots=True)
class PhysicalBounds:
    """One physical queue's offsets: max is exclusive (the next offset to be written)."""

    min_offset: int
    max_offset: int
    last_store_timestamp: int = 0  # 0 when the queue is empty
    avg_message_bytes: int = 0  # mean stored size of the newest messages, 0 when unknown


@dataclass(frozen=True, slots=True)
class BrokerState:
    """One live broker's view of a topic: its mapping copy, topic config and physical bounds."""

    name: str
    addr: str
    mapping: TopicQueueMapping | None
    foreign_bname: str  # a mapping file of another broker found in this broker's directory
    config: TopicConfig | None
    physical: Mapping[int, PhysicalBounds]

    @property
    def physical_count(self) -> int:
        return self.config.write_queues if self.config is not None and self.config.is_static else 0


States = Mapping[str, BrokerState]


def _bounds(states: States, bname: str, queue: int) -> PhysicalBounds | None:
    state = states.get(bname)
    return state.physical.get(queue) if state is not None else None


def is_static_anywhere(states: States) -> bool:
    return any(s.mapping is not None or (s.config is not None and s.config.is_static) for s in states.values())


def check_states(topic: str, states: States) -> ConsistencyReport:
    """The global epoch check over every live broker that takes part in the topic; a broker that
    holds the name as a dynamic topic is a name conflict."""
    dynamic = sorted(n for n, s in states.items() if s.config is not None and not s.config.is_static)
    if dynamic:
        raise StaticTopicRefusedError(f"topic {topic!r} exists as a dynamic topic on {dynamic}: name conflict")
    members = {n: s.mapping for n, s in states.items() if s.mapping is not None or s.config is not None}
    report = check_consistency(topic, members, live=states)
    for name, st in sorted(states.items()):
        if st.foreign_bname:
            report.problems.append(
                f"broker {name} holds a mapping file of broker {st.foreign_bname!r} (ignored, never served)"
            )
    return report


def segment_rows(chain: Chain, states: States) -> list[dict[str, int | str]]:
    """Each segment of a chain with its physical min/max (for topicStatus)."""
    rows: list[dict[str, int | str]] = []
    for item in chain:
        bounds = _bounds(states, item.bname, item.queue)
        rows.append(
            {
                "bname": item.bname,
                "queue": item.queue,
                "gen": item.gen,
                "logicOffset": item.logic_offset,
                "startOffset": item.start_offset,
                "endOffset": item.end_offset,
                "physicalMin": bounds.min_offset if bounds is not None else -1,
                "physicalMax": bounds.max_offset if bounds is not None else -1,
                "timeOfStart": item.time_of_start,
                "timeOfEnd": item.time_of_end,
            }
        )
    return rows


def logic_bounds(chain: Chain, states: States) -> tuple[int, int, int]:
    """(min, max, last store timestamp) of a logic queue, from its segments' physical bounds."""
    decided = [i for i in chain if i.decided]
    if not decided:
        return 0, 0, 0
    first, last = decided[0], decided[-1]
    lo = _bounds(states, first.bname, first.queue)
    hi = _bounds(states, last.bname, last.queue)
    low = first.to_logic(lo.min_offset) if lo is not None else first.logic_offset
    end = last.end_offset if last.end_offset >= 0 else (hi.max_offset if hi is not None else last.start_offset)
    high = last.to_logic(end)
    if chain[-1].decided:
        high = max(high, chain[-1].logic_offset)
    return low, high, hi.last_store_timestamp if hi is not None else 0


def chain_lag(chain: Chain, states: States, offset: int) -> int:
    """Messages of the logic queue at or after `offset`, summed over its decided segments (the
    jump between two segments' logic offsets holds no message)."""
    lag = 0
    for item in chain:
        if not item.decided:
            continue
        bounds = _bounds(states, item.bname, item.queue)
        end = item.logic_end(bounds.max_offset if bounds is not None else item.start_offset)
        lag += max(0, end - max(item.logic_offset, offset))
    return lag
