"""The staged exactly-once sink's records (pure): staged chunks, target tails and the decision.

A *chunk* is one SEND_BATCH_MESSAGE body (batch_encode) of one task attempt's rows for one target
logic queue, stored as one plain message of the staging topic. Row i of a task attempt carries the
UNIQ_KEY `token + %08X(i)` inside the body; a chunk is named by its first row's, which is how the
driver recognises a chunk that already landed in its target queue. A *tail* is where a target logic
queue's leading segment ended when the decision was made: (broker, physical queue, gen, offset).
The *decision* of a micro-batch names its chunks (in forwarding order) and its targets' tails; it is
stored as JSON messages keyed `staticmq-staged:<topic>:<writer>:<batch>` in the decision topic.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from staticmq_spark.errors import InternalError

STAGED_VERSION = 2
CHUNK_BYTES = 3 << 20  # per decision message; RocketMQ's message limit is 4 MiB


@dataclass(frozen=True, slots=True, order=True)
class StagedChunk:
    partition: int
    seq: int  # the chunk's number in its task attempt (send order)
    token: str  # the task attempt's
    logic: int  # target logic queue
    first: int  # the task's number of the chunk's first row
    count: int  # rows
    bname: str  # where it is staged: broker, staging queue, queue offset
    queue: int
    offset: int

    @property
    def first_key(self) -> str:
        return uniq_key(self.token, self.first)


@dataclass(frozen=True, slots=True)
class Tail:
    """Where a target logic queue's leader segment ended before the copy."""

    logic: int
    bname: str
    queue: int  # physical
    gen: int
    offset: int  # physical max offset


@dataclass(frozen=True)
class StagedDecision:
    topic: str
    writer: str
    batch: int
    chunks: list[StagedChunk]
    tails: dict[int, Tail] = field(default_factory=dict)  # logic queue -> tail

    @property
    def key(self) -> str:
        return staged_key(self.topic, self.writer, self.batch)

    @property
    def rows(self) -> int:
        return sum(c.count for c in self.chunks)

    def by_queue(self) -> dict[int, list[StagedChunk]]:
        """Each target logic queue's chunks, in forwarding order."""
        out: dict[int, list[StagedChunk]] = {}
        for c in self.chunks:
            out.setdefault(c.logic, []).append(c)
        return out


def uniq_key(token: str, row: int) -> str:
    """The UNIQ_KEY of row `row` of task attempt `token` (as batch_encode.uniq_keys writes it)."""
    return f"{token}{row & 0xFFFFFFFF:08X}"


def staged_key(topic: str, writer: str, batch: int) -> str:
    return f"staticmq-staged:{topic}:{writer}:{batch}"


def forwarding_order(chunks: Iterable[StagedChunk]) -> list[StagedChunk]:
    """Chunks in the order they are forwarded: by partition, then each attempt's send order."""
    return sorted(chunks)


def check_attempts(chunks: Iterable[StagedChunk]) -> None:
    """One attempt per partition (Spark commits one attempt's message per partition)."""
    seen: dict[int, str] = {}
    for c in chunks:
        if seen.setdefault(c.partition, c.token) != c.token:
            raise InternalError(f"partition {c.partition} has chunks of two task attempts in one commit")


def missing(chunks: list[StagedChunk], landed: set[str]) -> list[StagedChunk]:
    """The chunks whose first row's UNIQ_KEY was not found in the target queue."""
    return [c for c in chunks if c.first_key not in landed]


def _chunk_row(c: StagedChunk) -> list[Any]:
    return [c.partition, c.seq, c.token, c.logic, c.first, c.count, c.bname, c.queue, c.offset]


def _chunk_of(raw: list[Any]) -> StagedChunk:
    p, s, t, logic, first, count, b, q, o = raw
    return StagedChunk(int(p), int(s), str(t), int(logic), int(first), int(count), str(b), int(q), int(o))


def encode_staged(decision: StagedDecision, run: str = "", at_ms: int = 0) -> list[bytes]:
    """The decision as message bodies of at most about CHUNK_BYTES each (at least one). `run` names
    this recording and `at_ms` is its time: parts left by a driver that died while recording are
    never mixed with a later recording's."""
    rows = [json.dumps(_chunk_row(c), separators=(",", ":")) for c in decision.chunks]
    groups: list[list[str]] = [[]]
    size = 0
    for text in rows:
        if groups[-1] and size + len(text) > CHUNK_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += len(text) + 1
    tails = [[t.logic, t.bname, t.queue, t.gen, t.offset] for _, t in sorted(decision.tails.items())]
    bodies = []
    for i, group in enumerate(groups):
        head = {
            "v": STAGED_VERSION,
            "topic": decision.topic,
            "writer": decision.writer,
            "batch": decision.batch,
            "run": run,
            "at": at_ms,
            "part": i,
            "parts": len(groups),
            "tails": tails if i == 0 else [],
        }
        text = json.dumps(head, separators=(",", ":"))[:-1] + ',"chunks":[' + ",".join(group) + "]}"
        bodies.append(text.encode())
    return bodies


def decision_records(
    bodies: Iterable[bytes], topic: str, writer: str, batch: int, version: int, what: str
) -> Iterator[dict[str, Any]]:
    """The JSON records of (topic, writer, batch) among messages found by key (strangers and
    non-JSON bodies skipped); a record of another format version is an error naming `what`."""
    for body in bodies:
        try:
            raw = json.loads(body)
        except ValueError:
            continue
        if not isinstance(raw, dict) or (raw.get("topic"), raw.get("writer"), raw.get("batch")) != (
            topic,
            writer,
            batch,
        ):
            continue
        if raw.get("v") != version:
            raise InternalError(f"{what} of {writer}:{batch} has version {raw.get('v')}, not {version}")
        yield raw


def decode_staged(topic: str, writer: str, batch: int, bodies: list[bytes]) -> StagedDecision | None:
    """The decision of (topic, writer, batch) from the messages found (any order, duplicates and
    strangers allowed); None when no complete set of its parts is among them."""
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for raw in decision_records(bodies, topic, writer, batch, STAGED_VERSION, "staged decision"):
        runs.setdefault(str(raw.get("run", "")), {})[int(raw["part"])] = raw
    complete = [
        parts for parts in runs.values() if sorted(parts) == list(range(int(next(iter(parts.values()))["parts"])))
    ]
    if not complete:
        return None
    parts = min(complete, key=lambda p: int(p[0].get("at", 0)))  # the first recording that completed
    chunks = [_chunk_of(r) for i in range(len(parts)) for r in parts[i]["chunks"]]
    tails = {int(t[0]): Tail(int(t[0]), str(t[1]), int(t[2]), int(t[3]), int(t[4])) for t in parts[0]["tails"]}
    return StagedDecision(topic, writer, batch, chunks, tails)
