"""Source offsets as Spark stores them: Kafka-style JSON of logic offsets, {"orders": {"0": 42}}.

Batch 0's end offset additionally carries the start it was planned from (INITIAL_KEY): Spark
calls initialOffset() again when it replays batch 0 after a restart, and a `latest` or timestamp
start resolved anew would silently skip or repeat messages. The key holds a '.', which no topic
name can, so it never collides with a topic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from staticmq_spark.errors import InvalidOptionError

INITIAL_KEY = "staticmq.initialOffsets"


def to_json(topic: str, offsets: Mapping[int, int], initial: Mapping[int, int] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {topic: {str(q): int(o) for q, o in sorted(offsets.items())}}
    if initial is not None:
        out[INITIAL_KEY] = {str(q): int(o) for q, o in sorted(initial.items())}
    return out


def from_json(obj: Mapping[str, Any], topic: str, total_queues: int) -> dict[int, int]:
    """Logic offsets per queue; a queue count other than the topic's is a clear error."""
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


def initial_of(obj: Mapping[str, Any]) -> dict[int, int] | None:
    raw = obj.get(INITIAL_KEY)
    return None if not isinstance(raw, dict) else {int(q): int(o) for q, o in raw.items()}
