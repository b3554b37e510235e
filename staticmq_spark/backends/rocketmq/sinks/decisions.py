"""The exactly-once sink's durable decisions on a RocketMQ cluster.

A decision names every half message of one micro-batch (topic, writer, batch) that its driver is
about to commit, and where each target physical queue ended before the first commit. It is written
before any half is committed, as one or more messages (chunks) of a plain topic, keyed
`staticmq-decision:<topic>:<writer>:<batch>`, and found again through the brokers' message index
(QUERY_MESSAGE by key). A decision is complete when all its chunks are found; a driver that died
while writing one left no decision (nothing was committed yet).
"""

from __future__ import annotations

import base64
import json
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.sinks.staged_chunks import decision_records
from staticmq_spark.backends.rocketmq.sinks.transactions import SinkOwnedTopic, query_by_key
from staticmq_spark.backends.rocketmq.wire.batch_encode import uniq_keys
from staticmq_spark.backends.rocketmq.wire.remoting import encode_properties
from staticmq_spark.backends.rocketmq.wire.stored_messages import decode_stored
from staticmq_spark.errors import BrokerUnavailableError

I64 = npt.NDArray[np.int64]
CHUNK_BYTES = 3 << 20  # RocketMQ's message limit is 4 MiB
DECISION_VERSION = 1


@dataclass(frozen=True)
class HalfRun:
    """Halves one task attempt (`token`) prepared for one logic queue, on its leader's physical queue.
    Half i is row `rows[i]` of the task; its UNIQ_KEY is `uniq_key(token, rows[i])`."""

    token: str
    logic: int
    bname: str
    queue: int  # physical queue on bname
    gen: int  # the leader item's gen when the halves were sent
    rows: I64
    commit_log_offsets: I64
    table_offsets: I64
    sent_ms: int = 0  # the task's clock when it began sending; 0 in a decision read back (not recorded)

    @property
    def count(self) -> int:
        return len(self.rows)

    def uniq_keys(self) -> pa.Array:
        return uniq_keys(self.token, self.rows)


@dataclass(frozen=True)
class Decision:
    topic: str  # the sink's topic
    writer: str
    batch: int
    runs: list[HalfRun]
    tails: dict[tuple[str, int], int] = field(default_factory=dict)  # (bname, physical queue) -> max offset

    @property
    def key(self) -> str:
        return decision_key(self.topic, self.writer, self.batch)


def decision_key(topic: str, writer: str, batch: int) -> str:
    return f"staticmq-decision:{topic}:{writer}:{batch}"


def _pack(values: I64) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(values, dtype="<i8").tobytes(), 1)).decode()


def _unpack(text: str) -> I64:
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype="<i8").astype(np.int64)


def _run_json(run: HalfRun) -> dict[str, Any]:
    return {
        "token": run.token,
        "logic": run.logic,
        "bname": run.bname,
        "queue": run.queue,
        "gen": run.gen,
        "rows": _pack(run.rows),
        "clo": _pack(run.commit_log_offsets),
        "tso": _pack(run.table_offsets),
    }


def _run_of(raw: dict[str, Any]) -> HalfRun:
    return HalfRun(
        token=str(raw["token"]),
        logic=int(raw["logic"]),
        bname=str(raw["bname"]),
        queue=int(raw["queue"]),
        gen=int(raw["gen"]),
        rows=_unpack(raw["rows"]),
        commit_log_offsets=_unpack(raw["clo"]),
        table_offsets=_unpack(raw["tso"]),
    )


def encode_decision(decision: Decision) -> list[bytes]:
    """The decision as message bodies of at most about CHUNK_BYTES each (at least one)."""
    runs = [json.dumps(_run_json(r), separators=(",", ":")) for r in decision.runs]
    groups: list[list[str]] = [[]]
    size = 0
    for text in runs:
        if groups[-1] and size + len(text) > CHUNK_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(text)
        size += len(text)
    tails = [[b, q, o] for (b, q), o in sorted(decision.tails.items())]
    bodies = []
    for i, group in enumerate(groups):
        head = {
            "v": DECISION_VERSION,
            "topic": decision.topic,
            "writer": decision.writer,
            "batch": decision.batch,
            "chunk": i,
            "chunks": len(groups),
            "tails": tails if i == 0 else [],
        }
        text = json.dumps(head, separators=(",", ":"))[:-1] + ',"runs":[' + ",".join(group) + "]}"
        bodies.append(text.encode())
    return bodies


def decode_decision(topic: str, writer: str, batch: int, bodies: list[bytes]) -> Decision | None:
    """The decision of (topic, writer, batch) from the chunks found (any order, duplicates and strangers
    allowed); None when no complete set of chunks is among them."""
    chunks: dict[int, dict[str, Any]] = {}
    total = None
    for raw in decision_records(bodies, topic, writer, batch, DECISION_VERSION, "decision"):
        chunks[int(raw["chunk"])] = raw
        total = int(raw["chunks"])
    if total is None or sorted(chunks) != list(range(total)):
        return None
    runs = [_run_of(r) for i in range(total) for r in chunks[i]["runs"]]
    tails = {(str(b), int(q)): int(o) for b, q, o in chunks[0]["tails"]}
    return Decision(topic, writer, batch, runs, tails)


class DecisionLog(SinkOwnedTopic):
    """Decisions in a plain topic with one queue on every master broker (created when missing)."""

    role = "decision"

    def record(self, decision: Decision) -> None:
        """Every chunk stored on one broker (the first that takes them all), or an error."""
        self.record_bodies(decision.key, f"batch {decision.batch}", encode_decision(decision))

    def record_bodies(self, key: str, what: str, bodies: list[bytes]) -> None:
        """Messages keyed `key`, all stored on one broker (the first that takes them all), or an error."""
        props = encode_properties({"KEYS": key, "WAIT": "true"})
        errors = []
        for name, addr in sorted(self.hosts().items()):
            try:
                for body in bodies:
                    self.client.send(addr, name, self.topic, 0, body, props, producer_group="staticmq_sink")
                return
            except BrokerUnavailableError as exc:
                errors.append(f"{name}: {exc.message}")
        raise BrokerUnavailableError(f"no broker stored the decision of {what} in {self.topic!r}: " + "; ".join(errors))

    def find(self, topic: str, writer: str, batch: int, wait_index_s: float = 0.0) -> Decision | None:
        """The recorded decision of (topic, writer, batch), looked up on every broker holding the log."""
        key = decision_key(topic, writer, batch)
        deadline = time.monotonic() + wait_index_s
        while True:
            decision = decode_decision(topic, writer, batch, self.find_bodies(key, f"batch {batch}"))
            if decision is not None or time.monotonic() >= deadline:
                return decision
            time.sleep(0.2)

    def find_bodies(self, key: str, what: str) -> list[bytes]:
        """The bodies of every message keyed exactly `key`, on every broker holding the log."""
        bodies: list[bytes] = []
        for name, addr in sorted(self.hosts().items()):
            try:
                found = query_by_key(self.client, addr, self.topic, key)
            except BrokerUnavailableError as exc:
                raise BrokerUnavailableError(
                    f"cannot tell whether {what} was decided already: broker {name} is unreachable ({exc.message})"
                ) from None
            if found:
                stored = decode_stored(found, properties=False).columns
                keys = stored.column("key").to_pylist()
                bodies += [b for k, b in zip(keys, stored.column("body").to_pylist(), strict=True) if k == key]
        return bodies


class DecisionLogs:
    """A sink's decision log of each decision topic, made when first asked for."""

    def __init__(self, instance: RocketMQClientInstance) -> None:
        self.instance = instance
        self._logs: dict[str, DecisionLog] = {}

    def of(self, topic: str) -> DecisionLog:
        if topic not in self._logs:
            self._logs[topic] = DecisionLog(self.instance, topic)
        return self._logs[topic]
