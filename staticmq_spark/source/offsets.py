"""Source offsets as Spark stores them: Kafka-style JSON of logic offsets per topic and logic queue,
{"orders": {"0": 42, "1": 7}, "clicks": {"0": 3}}.

Batch 0's end offset additionally carries the start it was planned from (INITIAL_KEY): Spark
calls initialOffset() again when it replays batch 0 after a restart, and a `latest` or timestamp
start resolved anew would silently skip or repeat messages. The reported latest offset carries
each queue's lag (LAG_KEY). The keys hold a '.', which no topic name can, so they never collide
with a topic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from staticmq_spark.errors import InvalidOptionError

INITIAL_KEY = "staticmq.initialOffsets"
LAG_KEY = "staticmq.lag"
LAG_TOTAL_KEY = "staticmq.lagTotal"
Offsets = dict[str, dict[int, int]]  # topic -> logic queue -> logic offset


def to_json(offsets: Mapping[str, Mapping[int, int]], initial: Offsets | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {t: _queues_json(per_queue) for t, per_queue in sorted(offsets.items())}
    if initial is not None:
        out[INITIAL_KEY] = {t: _queues_json(per_queue) for t, per_queue in sorted(initial.items())}
    return out


def _queues_json(per_queue: Mapping[int, int]) -> dict[str, int]:
    return {str(q): int(o) for q, o in sorted(per_queue.items())}


def topics_of(obj: Mapping[str, Any]) -> list[str]:
    return sorted(k for k in obj if "." not in k)


def from_json(obj: Mapping[str, Any], topic: str, total_queues: int) -> dict[int, int]:
    """Logic offsets of `topic` per queue; a queue count other than the topic's is a clear error."""
    per_queue = obj.get(topic)
    if not isinstance(per_queue, dict):
        raise InvalidOptionError(f"offsets {dict(obj)!r} do not describe topic {topic!r}")
    offsets = {int(q): int(o) for q, o in per_queue.items()}
    if sorted(offsets) != list(range(total_queues)):
        raise InvalidOptionError(
            f"topic {topic!r} now has {total_queues} logic queues but the query's offsets cover "
            f"{len(offsets)} ({sorted(offsets)}): the number of logic queues changed; this query cannot "
            "continue from its checkpoint without reshuffling its shards"
        )
    return offsets


def initial_of(obj: Mapping[str, Any], topics: list[str]) -> Offsets | None:
    """The start carried in batch 0's end offset. A checkpoint of a single-topic query from before
    topic lists carries {"queue": offset}: it belongs to that query's one topic."""
    raw = obj.get(INITIAL_KEY)
    if not isinstance(raw, dict):
        return None
    if raw and all(not isinstance(v, dict) for v in raw.values()):
        return {topics[0]: {int(q): int(o) for q, o in raw.items()}} if len(topics) == 1 else None
    return {t: {int(q): int(o) for q, o in per_queue.items()} for t, per_queue in raw.items()}


def with_lag(latest: Offsets, lag: Offsets) -> dict[str, Any]:
    """The latest offsets plus, per topic and logic queue, how many messages the query is behind
    them (`lag`: counted over the queue's segments, so a remap's offset jump counts nothing) and
    their total: what the query progress shows as the source's latestOffset."""
    return {
        **to_json(latest),
        LAG_KEY: {t: _queues_json(per_queue) for t, per_queue in sorted(lag.items())},
        LAG_TOTAL_KEY: sum(v for per_queue in lag.values() for v in per_queue.values()),
    }
