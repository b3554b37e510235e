"""The exactly-once sink on Apache RocketMQ static topics: stage, decide, forward.

1. **Stage** (tasks). Each task attempt encodes its rows exactly as the at-least-once path does
   (batch_encode: one SEND_BATCH_MESSAGE body per target logic queue and chunk, each row with the
   UNIQ_KEY `<attempt token><row number, 8 hex>`) and stores every body as one plain message of the
   staging topic (a plain topic, STAGING_QUEUES queues on every master broker, created when missing),
   on the broker leading the chunk's target queue. Staged rows are invisible to readers of the
   target topic. The chunks' locations travel to the driver in the task's TaskWrite.detail.
2. **Decide** (driver). The commit records the decision in the decision topic before anything is
   visible: the chunks of the attempts Spark committed (no other attempt's chunk is ever named) and
   each target logic queue's tail (leader broker, physical queue, gen, max offset).
3. **Forward** (driver). Each staged body is read back and sent unchanged to its target logic queue's
   current leader as a SEND_BATCH_MESSAGE (no row is decoded); target queues in parallel, each queue's
   chunks in order, one at a time.

A commit that finds its batch decided already (a replay after a driver died mid-commit) forwards the
recorded decision, never its own chunks. Before sending a chunk whose fate is unknown (a recovery, or
an unanswered or refused send) the driver reads the target queue from the recorded tail - the tail's
segment and every newer segment of the logic queue - and skips chunks whose first row's UNIQ_KEY is
there. A chunk is stored whole or not at all (one SEND_BATCH is one append), so a row is never written
twice. A remapped target queue gets the rest of its chunks in its new segment. Nothing here marks rows
with properties of its own: a RocketMQ consumer sees the row's properties and RocketMQ's system ones.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from staticmq_spark.backends.api import EXACTLY_ONCE, TaskWrite
from staticmq_spark.backends.retry import retrying
from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance, retriable
from staticmq_spark.backends.rocketmq.leaders import Leader
from staticmq_spark.backends.rocketmq.sinks.decisions import DecisionLogs
from staticmq_spark.backends.rocketmq.sinks.staged_chunks import (
    StagedChunk,
    StagedDecision,
    Tail,
    check_attempts,
    decode_staged,
    encode_staged,
    forwarding_order,
    missing,
    staged_key,
)
from staticmq_spark.backends.rocketmq.sinks.transactions import (
    DEFAULT_TOPIC,
    RowRequests,
    SinkOwnedTopic,
    send_messages,
)
from staticmq_spark.backends.rocketmq.wire.batch_encode import MAX_MESSAGE, encode_rows, properties_column, uniq_keys
from staticmq_spark.backends.rocketmq.wire.remoting import PullAnswer
from staticmq_spark.backends.rocketmq.wire.stored_messages import decode_stored, stored_uniq_keys
from staticmq_spark.backends.targets import target_runs
from staticmq_spark.backends.types import SinkRows, WriteSettings
from staticmq_spark.errors import BrokerUnavailableError, ConflictError, StaticMQError
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.rows import arrays

log = logging.getLogger(__name__)
PRODUCER_GROUP = "staticmq_sink"
STAGING_QUEUES = 8  # per broker: tasks spread over them by partition
STAGED_MAX = MAX_MESSAGE - (64 << 10)  # a staged body and its message head fit RocketMQ's 4 MiB limit
SCAN_BATCH = 256
PREFETCH = 4  # staged bodies read ahead per target queue
WAIT = "WAIT\x01true\x02"
SETTLE_S = 1.0  # before reading a target queue to see whether an unanswered send landed
Hook = Callable[[str, object], None]


def _no_hook(step: str, what: object) -> None:
    return None


class StagingTopic(SinkOwnedTopic):
    """The plain staging topic: STAGING_QUEUES queues on every master broker (created when missing)."""

    role = "staging"

    def __init__(self, instance: RocketMQClientInstance, topic: str) -> None:
        super().__init__(instance, topic, queues=STAGING_QUEUES)

    def addr(self, bname: str) -> str:
        addr = self.hosts().get(bname) or self.hosts(refresh=True).get(bname)
        if addr is None:
            raise BrokerUnavailableError(f"broker {bname} holding staged rows of {self.topic!r} is not registered")
        return addr


class RocketMQStagedSink:
    """Exactly once: staged chunks from the tasks; a recorded decision and the forwarding from the driver."""

    guarantee = EXACTLY_ONCE

    def __init__(self, instance: RocketMQClientInstance) -> None:
        self.instance = instance
        self.client = instance.remoting
        self.leaders = instance.leaders
        self._staging: dict[str, StagingTopic] = {}
        self.decisions = DecisionLogs(instance)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="rocketmq-staged")
        # called at "deciding" (before the decision is stored), "decided", "sent" (a chunk's send not
        # answered yet) and "forwarded" (answered): the kill points the tests crash a driver at
        self.hook: Hook = _no_hook

    def _staging_topic(self, settings: WriteSettings) -> StagingTopic:
        name = settings.staging_topic
        if name not in self._staging:
            self._staging[name] = StagingTopic(self.instance, name)
        return self._staging[name]

    # ------------------------------------------------------------------ executor side

    def total_queues(self, topic: str) -> int:
        return self.leaders.of(topic)[0]

    def write_task(
        self, settings: WriteSettings, writer: str, batch: int, partition: int, rows: Iterator[SinkRows]
    ) -> TaskWrite:
        token = uuid.uuid4().hex[:16].upper()
        _, leaders = self.leaders.of(settings.topic)
        staging = self._staging_topic(settings)
        hosts = staging.hosts()
        fallback = sorted(hosts)
        max_bytes = max(1, min(settings.request_bytes, STAGED_MAX))
        queue = partition % STAGING_QUEUES
        chunks: list[StagedChunk] = []
        written = 0
        for placed in rows:
            numbers = placed.numbers
            props = properties_column(placed.key, placed.tags, placed.properties, uniq_keys(token, numbers))
            order, runs = target_runs(placed.targets)
            if order is None:
                order = np.arange(placed.num_rows, dtype=np.int64)
            per_broker: dict[str, list[tuple[int, int, int, bytes]]] = {}  # bname -> (logic, first, count, body)
            for logic, a, b in runs:
                lead: Leader | None = leaders.get(logic)
                if lead is None:
                    raise ConflictError(f"logic queue {logic} of {settings.topic!r} has no leader now (mid-remap?)")
                picked = order[a:b]
                take = arrays.numbers(picked)
                encoded = encode_rows(placed.value.take(take), props.take(take))
                bname = lead.bname if lead.bname in hosts else fallback[logic % len(fallback)]
                for lo, hi in encoded.chunks(max_bytes):
                    per_broker.setdefault(bname, []).append(
                        (logic, int(numbers[picked[lo]]), hi - lo, encoded.body(lo, hi))
                    )
            for bname, items in sorted(per_broker.items()):
                offsets = self._stage(hosts[bname], bname, staging.topic, queue, [body for *_, body in items])
                for (logic, first, count, _body), offset in zip(items, offsets, strict=True):
                    chunks.append(StagedChunk(partition, len(chunks), token, logic, first, count, bname, queue, offset))
            written += placed.num_rows
        return TaskWrite(writer, batch, partition, written, chunks)

    def _stage(
        self, addr: str, bname: str, topic: str, queue: int, bodies: list[bytes], retry_s: float = 60.0
    ) -> list[int]:
        """Each body as one plain message of the staging queue (pipelined): their queue offsets."""
        fixed: dict[str, object] = {
            "producerGroup": PRODUCER_GROUP,
            "topic": topic,
            "defaultTopic": DEFAULT_TOPIC,
            "defaultTopicQueueNums": 4,
            "queueId": queue,
            "sysFlag": 0,
            "bornTimestamp": int(time.time() * 1000),
            "flag": 0,
            "reconsumeTimes": 0,
            "unitMode": False,
            "batch": False,
            "bname": bname,
        }
        requests = RowRequests(fixed, {"properties": arrays.repeated(WAIT, len(bodies))}, pa.array(bodies, pa.binary()))
        answers = send_messages(self.client, addr, requests, f"staged rows for {topic}/{queue} at {bname}", retry_s)
        return [int(a.ext.get("queueOffset", "-1")) for a in answers]

    # ------------------------------------------------------------------ driver side

    def recorded(self, settings: WriteSettings, writer: str, batch: int) -> StagedDecision | None:
        key = staged_key(settings.topic, writer, batch)
        bodies = self.decisions.of(settings.decision_topic).find_bodies(key, f"batch {batch} of {writer}")
        return decode_staged(settings.topic, writer, batch, bodies)

    def commit(self, settings: WriteSettings, writer: str, batch: int, tasks: Sequence[TaskWrite]) -> int:
        chunks = forwarding_order(c for t in tasks for c in (t.detail or []))
        check_attempts(chunks)
        recorded = self.recorded(settings, writer, batch)
        if recorded is not None:
            log.warning(
                "micro-batch %d of %s was decided before (a driver stopped mid-commit): forwarding what of that "
                "decision is missing; this run's %d staged chunk(s) are never forwarded",
                batch,
                writer,
                len(chunks),
            )
            return self.forward(settings, recorded, recovering=True)
        if not chunks:
            return 0
        decision = StagedDecision(settings.topic, writer, batch, chunks, self._tails(settings.topic, chunks))
        self.hook("deciding", decision)
        bodies = encode_staged(decision, uuid.uuid4().hex, int(time.time() * 1000))
        self.decisions.of(settings.decision_topic).record_bodies(decision.key, f"batch {batch}", bodies)
        self.hook("decided", decision)
        return self.forward(settings, decision, recovering=False)

    def _tails(self, topic: str, chunks: Sequence[StagedChunk]) -> dict[int, Tail]:
        _, leaders = self.leaders.of(topic)
        wanted: dict[str, set[int]] = {}
        targets = sorted({c.logic for c in chunks})
        for logic in targets:
            lead = leaders.get(logic)
            if lead is None:
                raise ConflictError(f"logic queue {logic} of {topic!r} has no leader now (mid-remap?); retry the batch")
            wanted.setdefault(lead.bname, set()).add(lead.queue)
        ends: dict[tuple[str, int], int] = {}
        for bname, queues in wanted.items():
            addr = next(lead.addr for lead in leaders.values() if lead.bname == bname)
            bounds = self.client.physical_bounds(addr, topic, sorted(queues))
            ends.update({(bname, q): hi for q, (_lo, hi) in bounds.items()})
        return {
            logic: Tail(
                logic,
                leaders[logic].bname,
                leaders[logic].queue,
                leaders[logic].gen,
                ends[(leaders[logic].bname, leaders[logic].queue)],
            )
            for logic in targets
        }

    def forward(self, settings: WriteSettings, decision: StagedDecision, *, recovering: bool) -> int:
        """Send every chunk of the decision not in its target queue yet; the rows sent now."""
        patience = settings.send_timeout_ms / 1000  # how long one chunk waits for a broker
        staging = self._staging_topic(settings)
        self.instance.route(decision.topic, refresh=True)
        queues = sorted(decision.by_queue().items())

        def copy(item: tuple[int, list[StagedChunk]]) -> int:
            logic, chunks = item
            tail = decision.tails.get(logic)
            if tail is None:
                raise ConflictError(f"the decision of batch {decision.batch} names no tail for logic queue {logic}")
            return self._copy_queue(decision.topic, staging, tail, chunks, recovering, patience)

        if len(queues) <= 1:
            return sum(copy(q) for q in queues)
        return sum(self._pool.map(copy, queues))

    def _copy_queue(
        self,
        topic: str,
        staging: StagingTopic,
        tail: Tail,
        chunks: list[StagedChunk],
        recovering: bool,
        patience: float,
    ) -> int:
        todo = missing(chunks, self._landed(topic, tail, chunks)) if recovering else list(chunks)
        if recovering and len(todo) < len(chunks):
            log.info(
                "%s/%d: %d of %d chunk(s) landed before; sending the rest",
                topic,
                tail.logic,
                len(chunks) - len(todo),
                len(chunks),
            )
        reads: dict[int, Callable[[], bytes]] = {}
        sent = 0
        for i, chunk in enumerate(todo):
            for j in range(i, min(len(todo), i + PREFETCH)):
                if j not in reads:
                    reads[j] = self._read_staged(staging, todo[j], patience)
            body = reads.pop(i)()
            sent += self._send_chunk(topic, tail, chunk, body, patience)
        return sent

    def _read_staged(self, staging: StagingTopic, chunk: StagedChunk, patience: float) -> Callable[[], bytes]:
        """The chunk's staged body: its pull sent now (read ahead), answered when called. A broker that
        cannot be reached is asked again for `patience` seconds."""
        where = f"{staging.topic}/{chunk.queue}@{chunk.offset} on {chunk.bname}"
        what = f"staged chunk {chunk.seq} of partition {chunk.partition} ({where})"

        def submit() -> Callable[[], PullAnswer]:
            return self.client.submit_pull(
                staging.addr(chunk.bname), staging.topic, chunk.queue, chunk.offset, 1, logic=False, bname=chunk.bname
            )

        try:
            first: Callable[[], PullAnswer] | None = submit()
        except StaticMQError:
            first = None  # asked again below

        def body() -> bytes:
            def attempt(n: int) -> PullAnswer:
                waiter = first if n == 0 and first is not None else submit()
                return waiter()

            try:
                answer = retrying(f"reading {what}", patience, attempt, retriable=retriable)
            except StaticMQError as exc:
                raise StaticMQError(f"reading {what} failed ({exc.message}); a restarted query retries") from exc
            if answer.status is not PullStatus.FOUND:
                raise ConflictError(
                    f"{what} cannot be read ({answer.status.name}, {answer.remark}): it expired or was deleted "
                    "before its batch was forwarded"
                )
            stored = decode_stored(answer.body, properties=False)
            if len(stored.queue_offsets) == 0 or int(stored.queue_offsets[0]) != chunk.offset:
                raise ConflictError(f"{what}: the broker answered another message")
            return bytes(stored.columns.column("body")[0].as_py())

        return body

    def _send_chunk(self, topic: str, tail: Tail, chunk: StagedChunk, body: bytes, patience: float) -> int:
        """Send one chunk to its logic queue's leader; after a failed or unanswered send, only if it did
        not land. The rows it stored (0 when it had landed already)."""

        def attempt(n: int) -> int:
            # After a failed send (n > 0) the route is read again, and what landed is checked first: an
            # unanswered send may still be queued on the broker (it drops what waited over
            # waitTimeMillsInSendQueue, 200 ms), and a stored one reaches its consume queue a moment
            # after the commit log, so the retry waits SETTLE_S at least before it scans.
            if n > 0:
                try:
                    if chunk.first_key in self._landed(topic, tail, [chunk]):
                        return 0  # stored: its answer was lost
                except StaticMQError as scan:
                    log.info("cannot read %s/%d yet: %s", topic, chunk.logic, scan.message)
            bname, addr = self.instance.route(topic, refresh=n > 0).leader_addr(chunk.logic)
            answer = self.client.submit_send(
                addr, bname, topic, chunk.logic, body, WAIT, batch=True, producer_group=PRODUCER_GROUP
            )
            self.hook("sent", chunk)
            stored = answer()
            if stored.degraded:
                log.warning("forward to %s/%d stored but %s", topic, chunk.logic, stored.degraded)
            self.hook("forwarded", chunk)
            return chunk.count

        what = f"forward to {topic}/{chunk.logic}"
        try:
            return retrying(what, patience, attempt, retriable=retriable, min_wait_s=SETTLE_S)
        except StaticMQError as exc:
            raise StaticMQError(
                f"forwarding staged rows to {topic}/{chunk.logic} failed ({exc.message}); the decision is "
                "recorded: a restarted query forwards what is missing"
            ) from exc

    def _landed(self, topic: str, tail: Tail, chunks: Sequence[StagedChunk]) -> set[str]:
        """The first-row UNIQ_KEYs of `chunks` found in the logic queue from the tail on: the tail's
        segment from the tail's offset, every newer segment (higher gen) from its start."""
        wanted = {c.first_key for c in chunks}
        segments = {(tail.bname, tail.queue): tail.offset}
        for item in self.leaders.chain(topic, tail.logic):
            if item.gen > tail.gen:
                key = (item.bname, item.queue)
                segments[key] = min(segments.get(key, item.start_offset), item.start_offset)
        masters = self.instance.route(topic, refresh=True).masters
        found: set[str] = set()
        for (bname, queue), start in sorted(segments.items()):
            addr = masters.get(bname)
            if addr is None:
                raise BrokerUnavailableError(
                    f"cannot tell which staged rows reached {topic}/{tail.logic}: broker {bname} is not registered"
                )
            offset = start
            end = self.client.max_offset(addr, topic, queue, logic=False)
            while offset < end:
                answer = self.client.pull(addr, topic, queue, offset, SCAN_BATCH, logic=False, bname=bname)
                if answer.status is PullStatus.OFFSET_MOVED and answer.next_offset > offset:
                    offset = answer.next_offset
                    continue
                if not answer.body or answer.next_offset <= offset:
                    break
                keys = stored_uniq_keys(answer.body).to_pylist()
                found |= wanted.intersection(k for k in keys if k)
                offset = answer.next_offset
        return found

    def aborted(self) -> str:
        return (
            "its staged rows are never forwarded (the staging topic's retention removes them); nothing of it is visible"
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False)  # the connections are the backend's
