"""The broker half of the sink's exactly-once protocol (a two-phase commit per micro-batch).

1. stage:   tasks stage chunks of rows on the leader of each logic queue (invisible, not
            durable yet); a retried chunk (same staging id and seq) is stored once.
2. prepare: the driver sends the decision - which staging ids on which broker make up the
            batch - to every participant, which checks its chunks are complete, fsyncs them and
            stores the decision durably. A decision, once stored, never changes. Before the
            decision it stores the plan of its commit: the chunks of each logic queue
            in order (staging id, then seq), cut into appends of at most 16 MiB (or
            store.max_batch_bytes if smaller).
3. commit:  each participant makes the planned appends to the logic queues, each with an
            idempotency key derived from the decision (writer/batch/broker/staging id/seq of
            its first chunk, "+n" for n further chunks), then marks the transaction committed.
            An append whose logic queue moved meanwhile is forwarded to the new leader, which
            also looks for the key on the queue's earlier segments.
A replayed batch (the driver died mid-commit) finds the stored decision and re-drives it, so
exactly the first decision's rows are written, once, however the replay partitioned its rows.
"""

from __future__ import annotations

import threading

from broker_stub.broker.app import BrokerApp
from broker_stub.store.sink_staging import ChunkInfo, SinkStaging
from staticmq_spark.errors import (
    ConflictError,
    DataLossError,
    InvalidArgumentError,
    NotLeaderError,
    StaticTopicRefusedError,
)
from staticmq_spark.protocol.codec import PackedBatch
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.row_decode import validate_batch

APPEND_BYTES = 16 << 20  # staged chunks of one logic queue are appended together, up to this size


def plan_appends(chunks: list[tuple[str, ChunkInfo]], limit: int) -> list[tuple[int, list[tuple[str, int]]]]:
    """The commit's appends: the chunks of each logic queue in their order (staging id, then
    seq), cut into appends of at most `limit` bytes (a larger chunk alone)."""
    plan: list[tuple[int, list[tuple[str, int]]]] = []
    open_append: dict[int, tuple[list[tuple[str, int]], int]] = {}
    for staging_id, info in chunks:
        members, size = open_append.get(info.queue, ([], 0))
        if not members or size + info.data_len > limit:
            members, size = [], 0
            plan.append((info.queue, members))
        members.append((staging_id, info.seq))
        open_append[info.queue] = (members, size + info.data_len)
    return plan


class SinkService:
    def __init__(self, app: BrokerApp) -> None:
        self._app = app
        self._staging = SinkStaging(app.config.data_dir / "sink")
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, writer: str, batch: int) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((writer, batch), threading.Lock())

    # ------------------------------------------------------------------ stage

    def stage(self, req: pb.StageRequest) -> None:
        if not self._app.static.is_static(req.topic):
            raise StaticTopicRefusedError(f"topic {req.topic!r} is not a static topic: the sink writes static topics")
        mapping = self._app.mapping_files.get(req.topic)
        if mapping is None or not mapping.leads(req.queue_id):
            raise NotLeaderError(
                f"{self._app.name} does not lead logic queue {req.queue_id} of {req.topic!r}: refresh the route"
            )
        if req.batch < 0 or req.seq < 0:
            raise InvalidArgumentError("batch and seq must be >= 0")
        limit = self._app.config.store.max_batch_bytes
        if len(req.rows.data) > limit:
            raise InvalidArgumentError(
                f"a staged chunk of {len(req.rows.data)} bytes exceeds this broker's {limit}-byte batch limit: "
                "lower the sink option requestBytes"
            )
        rows = PackedBatch.from_wire(req.rows.data, req.rows.sizes)
        validate_batch(rows, self._app.config.store.max_message_bytes)
        self._staging.stage(req.writer, req.batch, req.staging_id, req.queue_id, req.seq, rows)

    # ------------------------------------------------------------------ prepare / commit

    def prepare(self, decision: pb.TxnDecision) -> None:
        with self._lock(decision.writer, decision.batch):
            stored = self._staging.decision(decision.writer, decision.batch)
            raw = decision.SerializeToString(deterministic=True)
            if stored is not None:
                if stored[0] != raw:
                    raise ConflictError(
                        f"transaction {decision.writer}/{decision.batch} was prepared with another decision"
                    )
                return
            chunks: list[tuple[str, ChunkInfo]] = []
            for ref in decision.parts[self._app.name].refs if self._app.name in decision.parts else ():
                chunks += [(ref.staging_id, info) for info in self._check_complete(decision, ref)]
                self._staging.make_durable(decision.writer, decision.batch, ref.staging_id)
            limit = min(APPEND_BYTES, self._app.config.store.max_batch_bytes)
            self._staging.record_plan(decision.writer, decision.batch, plan_appends(chunks, limit))
            self._staging.record_decision(decision.writer, decision.batch, raw, committed=False)

    def _check_complete(self, decision: pb.TxnDecision, ref: pb.StagingRef) -> list[ChunkInfo]:
        """The staged chunks the decision lists, in seq order, if they are all there."""
        wanted = set(ref.seqs)
        index = self._staging.index(decision.writer, decision.batch, ref.staging_id)
        chunks = [info for seq, info in sorted(index.items()) if seq in wanted]
        rows = sum(c.count for c in chunks)
        if [c.seq for c in chunks] != sorted(ref.seqs) or rows != ref.rows:
            raise ConflictError(
                f"transaction {decision.writer}/{decision.batch}: staging {ref.staging_id} on {self._app.name} holds "
                f"{len(chunks)} chunk(s) / {rows} row(s), the task staged {ref.chunks} / {ref.rows} "
                "(the broker lost staged rows: the batch must be retried)"
            )
        return chunks

    def commit(self, ref: pb.TxnRef) -> pb.TxnState:
        with self._lock(ref.writer, ref.batch):
            stored = self._staging.decision(ref.writer, ref.batch)
            if stored is None:
                raise ConflictError(f"transaction {ref.writer}/{ref.batch} was never prepared on {self._app.name}")
            raw, committed = stored
            decision = pb.TxnDecision.FromString(raw)
            rows = 0
            if not committed:
                rows = self._append_planned(decision, ref)
                self._staging.record_decision(ref.writer, ref.batch, raw, committed=True)
            self._staging.drop_batches_up_to(ref.writer, ref.batch)
            self._staging.forget_old_txns(ref.writer, ref.batch)
            return pb.TxnState(known=True, committed=True, decision=decision, rows=rows)

    def _append_planned(self, decision: pb.TxnDecision, ref: pb.TxnRef) -> int:
        """Make the planned appends; returns the rows appended (duplicates included)."""
        plan = self._plan(decision, ref)
        indexes = {
            staging_id: self._staging.index(ref.writer, ref.batch, staging_id)
            for staging_id in {s for _, members in plan for s, _ in members}
        }
        rows = 0
        for queue, members in plan:
            chunks = []
            for staging_id, seq in members:
                info = indexes[staging_id].get(seq)
                if info is None:
                    raise DataLossError(f"staged chunk {staging_id}/{seq} of {ref.writer}/{ref.batch} is missing")
                chunks.append(self._staging.read(ref.writer, ref.batch, staging_id, info))
            batch = PackedBatch.concat(chunks)
            self._append(decision.topic, queue, batch, self._key(ref, members))
            rows += batch.count
        return rows

    def _plan(self, decision: pb.TxnDecision, ref: pb.TxnRef) -> list[tuple[int, list[tuple[str, int]]]]:
        """The appends prepare planned; for a decision prepared before plans existed, one append
        per staged chunk the decision lists (what such a broker did)."""
        plan = self._staging.plan(ref.writer, ref.batch)
        if plan is not None:
            return plan
        out = []
        for staging in decision.parts[self._app.name].refs if self._app.name in decision.parts else ():
            index = self._staging.index(ref.writer, ref.batch, staging.staging_id)
            wanted = set(staging.seqs)
            out += [(info.queue, [(staging.staging_id, seq)]) for seq, info in sorted(index.items()) if seq in wanted]
        return out

    def _key(self, ref: pb.TxnRef, members: list[tuple[str, int]]) -> str:
        """The idempotency key of one append: its first chunk's, with the number of further chunks."""
        staging_id, seq = members[0]
        key = f"{ref.writer}/{ref.batch}/{self._app.name}/{staging_id}/{seq}"
        return key if len(members) == 1 else f"{key}+{len(members) - 1}"

    def state(self, ref: pb.TxnRef) -> pb.TxnState:
        stored = self._staging.decision(ref.writer, ref.batch)
        if stored is None:
            return pb.TxnState(known=False)
        return pb.TxnState(known=True, committed=stored[1], decision=pb.TxnDecision.FromString(stored[0]))

    def _append(self, topic: str, queue: int, rows: PackedBatch, key: str) -> None:
        """Append to the logic queue's leader: here, or forwarded to the broker leading it now."""
        mapping = self._app.mapping_files.get(topic)
        if mapping is not None and mapping.leads(queue):
            # staged rows were validated by this broker at StageRows (and CRC-checked on disk)
            self._app.static.send(topic, queue, rows, key.encode(), dedup_across_segments=True, validated=True)
            return
        request = pb.SendRequest(
            topic=topic,
            queue_id=queue,
            batch=pb.MessageBatch(data=rows.data, sizes=rows.sizes_bytes()),
            idempotency_key=key,
            dedup_across_segments=True,
        )
        self._app.peers.send_to_leader(topic, queue, request)
