"""The broker half of the sink's exactly-once protocol (a two-phase commit per micro-batch).

1. stage:   tasks stage chunks of rows on the leader of each logic queue (invisible, not
            durable yet); a retried chunk (same staging id and seq) is stored once.
2. prepare: the driver sends the decision - which staging ids on which broker make up the
            batch - to every participant, which checks its chunks are complete, fsyncs them and
            stores the decision durably. A decision, once stored, never changes. Before the
            decision it stores the plan of its commit: the chunks of each logic queue
            in order (staging id, then seq), cut into appends of at most 16 MiB (or
            store.max_batch_bytes if smaller).
3. commit:  each participant makes the planned writes, then marks the transaction committed.
            - write-once (the transaction staged at least store.sink_link_min_bytes here): the staging
              files are adopted by the commit log as segments, by rename, and one link record
              gives their chunks their queue offsets (MessageStore.link) - the rows are not
              written again. A `.adopt` record says where the files went before any moves,
              and the link's idempotency key (writer/batch/broker/link) makes it happen once.
            - copy (smaller transactions, so that small commits do not multiply segments):
              the planned appends, each with an idempotency key derived from the decision
              (writer/batch/broker/staging id/seq of its first chunk, "+n" for n further chunks).
            Chunks of a logic queue that moved to another broker meanwhile are copied to its
            new leader, keyed the same way (it also looks for the key on the queue's earlier
            segments), before the link; chunks that an interrupted commit copied that way are
            not linked if the queue has moved back here since (the same key, found on an
            earlier segment).
A replayed batch (the driver died mid-commit) finds the stored decision and re-drives it, so
exactly the first decision's rows are written, once, however the replay partitioned its rows.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from broker_stub.broker.peers import Peers
from broker_stub.broker.static_topic_service import StaticTopicService
from broker_stub.config import BrokerConfig
from broker_stub.store.atomic_file import fsync_path
from broker_stub.store.mapping_files import MappingFiles
from broker_stub.store.message_store import MessageStore
from broker_stub.store.sink_staging import ChunkInfo, SinkStaging, read_chunk, scan_staged
from broker_stub.store.store_results import StagedRecord
from broker_stub.store.topic_configs import TopicConfigs
from staticmq_spark.errors import (
    ConflictError,
    DataLossError,
    InvalidArgumentError,
    NotLeaderError,
    QueueNotFoundError,
    StaticTopicRefusedError,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.codec import PackedBatch
from staticmq_spark.protocol.rows.decode import validate_batch
from staticmq_spark.protocol.wire.stage_request import StageChunk

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
    def __init__(
        self,
        name: str,
        config: BrokerConfig,
        store: MessageStore,
        static: StaticTopicService,
        mapping_files: MappingFiles,
        topic_configs: TopicConfigs,
        peers: Peers,
    ) -> None:
        self._name = name
        self._config = config
        self._store = store
        self._static = static
        self._mapping_files = mapping_files
        self._topic_configs = topic_configs
        self._peers = peers
        self._staging = SinkStaging(config.data_dir / "sink", config.store.sink_direct_io)
        self._staging_root = config.data_dir / "sink" / "staging"
        self._staging_root.mkdir(parents=True, exist_ok=True)
        store.log_directory.mkdir(parents=True, exist_ok=True)
        # adoption moves files by rename: only within one file system
        self._can_link = os.stat(self._staging_root).st_dev == os.stat(store.log_directory).st_dev
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, writer: str, batch: int) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((writer, batch), threading.Lock())

    # ------------------------------------------------------------------ stage

    def stage(self, chunk: StageChunk) -> None:
        req = chunk.head
        if not self._static.is_static(req.topic):
            raise StaticTopicRefusedError(f"topic {req.topic!r} is not a static topic: the sink writes static topics")
        mapping = self._mapping_files.get(req.topic)
        if mapping is not None and not 0 <= req.queue_id < mapping.total_queues:
            total = mapping.total_queues
            raise QueueNotFoundError(f"static topic {req.topic!r} has {total} logic queues: no queue {req.queue_id}")
        if mapping is None or not mapping.leads(req.queue_id):
            raise NotLeaderError(
                f"{self._name} does not lead logic queue {req.queue_id} of {req.topic!r}: refresh the route"
            )
        if req.batch < 0 or req.seq < 0:
            raise InvalidArgumentError("batch and seq must be >= 0")
        limit = self._config.store.max_batch_bytes
        if len(chunk.data) > limit:
            raise InvalidArgumentError(
                f"a staged chunk of {len(chunk.data)} bytes exceeds this broker's {limit}-byte batch limit: "
                "lower the sink option requestBytes"
            )
        rows = PackedBatch.from_wire(chunk.data, chunk.sizes)
        validate_batch(rows, self._config.store.max_message_bytes)
        cfg = self._topic_configs.get(req.topic)
        uid = cfg.uid if cfg is not None else 0
        self._staging.stage(
            req.writer, req.batch, req.staging_id, req.queue_id, req.seq, rows, topic=req.topic, uid=uid
        )

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
            for ref in decision.parts[self._name].refs if self._name in decision.parts else ():
                chunks += [(ref.staging_id, info) for info in self._check_complete(decision, ref)]
                self._staging.make_durable(decision.writer, decision.batch, ref.staging_id)
            limit = min(APPEND_BYTES, self._config.store.max_batch_bytes)
            self._staging.record_plan(decision.writer, decision.batch, plan_appends(chunks, limit))
            self._staging.record_decision(decision.writer, decision.batch, raw, committed=False)

    def _check_complete(self, decision: pb.TxnDecision, ref: pb.StagingRef) -> list[ChunkInfo]:
        """The staged chunks the decision lists, in seq order, if they are all there."""
        wanted = set(ref.seqs)
        index = self._staging.index(decision.writer, decision.batch, ref.staging_id)
        chunks = [info for seq, info in sorted(index.items()) if seq in wanted]
        rows = sum(c.count for c in chunks)
        foreign = sorted({c.topic for c in chunks} - {decision.topic})
        if foreign:
            raise ConflictError(
                f"transaction {decision.writer}/{decision.batch}: staging {ref.staging_id} holds rows of {foreign}, "
                f"not of {decision.topic!r}"
            )
        if [c.seq for c in chunks] != sorted(ref.seqs) or rows != ref.rows:
            raise ConflictError(
                f"transaction {decision.writer}/{decision.batch}: staging {ref.staging_id} on {self._name} holds "
                f"{len(chunks)} chunk(s) / {rows} row(s), the task staged {ref.chunks} / {ref.rows} "
                "(the broker lost staged rows: the batch must be retried)"
            )
        return chunks

    def commit(self, ref: pb.TxnRef) -> pb.TxnState:
        with self._lock(ref.writer, ref.batch):
            stored = self._staging.decision(ref.writer, ref.batch)
            if stored is None:
                raise ConflictError(f"transaction {ref.writer}/{ref.batch} was never prepared on {self._name}")
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
        """Make the planned writes; returns the rows written now (duplicates included)."""
        plan = self._plan(decision, ref)
        link_key = f"{ref.writer}/{ref.batch}/{self._name}/link".encode()
        if not plan or self._store.stored_key(link_key) is not None:
            return 0  # linked before (the link comes after every copy)
        files = self._files(ref, {s for _, members in plan for s, _ in members})
        staged = sum(files[s][1][seq].record_len for _, members in plan for s, seq in members if seq in files[s][1])
        adopted = any(isinstance(f[0], int) for f in files.values())
        write_once = self._can_link and (adopted or staged >= self._config.store.sink_link_min_bytes)
        mapping = self._mapping_files.get(decision.topic)
        rows = 0
        linked: list[tuple[int, list[tuple[str, int]]]] = []
        for queue, members in plan:
            if write_once and mapping is not None and mapping.leads(queue):
                if not self._static.key_stored(decision.topic, queue, self._key(ref, members).encode()):
                    linked.append((queue, members))
                # else an interrupted commit forwarded these chunks while the queue was led elsewhere
                continue
            chunks = [self._read(files, staging_id, seq, ref) for staging_id, seq in members]
            batch = PackedBatch.concat(chunks)
            self._append(decision.topic, queue, batch, self._key(ref, members))
            rows += batch.count
        if linked:
            rows += self._link(decision.topic, ref, link_key, files, linked)
        return rows

    def _files(self, ref: pb.TxnRef, staging_ids: set[str]) -> dict[str, tuple[Path | int, dict[int, ChunkInfo]]]:
        """Where each staging id's file is - its staging path, or the commit-log position it
        was adopted at by an interrupted commit - and its chunks by seq."""
        adopted = self._staging.adoption(ref.writer, ref.batch)
        out: dict[str, tuple[Path | int, dict[int, ChunkInfo]]] = {}
        for staging_id in sorted(staging_ids):
            path = self._staging.staging_path(ref.writer, ref.batch, staging_id)
            base = adopted.get(staging_id)
            moved = self._store.segment_file(base) if base is not None and not path.exists() else None
            if base is not None and moved is not None:
                out[staging_id] = (base, scan_staged(moved)[0])
            else:
                out[staging_id] = (path, self._staging.index(ref.writer, ref.batch, staging_id))
        return out

    def _read(
        self, files: dict[str, tuple[Path | int, dict[int, ChunkInfo]]], staging_id: str, seq: int, ref: pb.TxnRef
    ) -> PackedBatch:
        where, index = files[staging_id]
        info = index.get(seq)
        path = self._store.segment_file(where) if isinstance(where, int) else where
        if info is None or path is None:
            raise DataLossError(f"staged chunk {staging_id}/{seq} of {ref.writer}/{ref.batch} is missing")
        return read_chunk(path, info)

    def _link(
        self,
        topic: str,
        ref: pb.TxnRef,
        key: bytes,
        files: dict[str, tuple[Path | int, dict[int, ChunkInfo]]],
        linked: list[tuple[int, list[tuple[str, int]]]],
    ) -> int:
        """Adopt the staging files holding the linked chunks and link those chunks, in order."""
        used = sorted({s for _, members in linked for s, _ in members})
        source = {s: i for i, s in enumerate(used)}
        groups: list[tuple[int, list[StagedRecord]]] = []
        for queue, members in linked:
            records = []
            for staging_id, seq in members:
                info = files[staging_id][1].get(seq)
                if info is None:
                    raise DataLossError(f"staged chunk {staging_id}/{seq} of {ref.writer}/{ref.batch} is missing")
                records.append(StagedRecord(source[staging_id], info.offset, info.rows_offset, info.sizes))
            groups.append((queue, records))
        sources = [files[s][0] for s in used]
        to_move = {s: p for s, p in zip(used, sources, strict=True) if isinstance(p, Path)}

        def before_adopt(bases: list[int]) -> None:
            where = self._staging.adoption(ref.writer, ref.batch)
            where.update(zip(to_move, bases, strict=True))
            self._staging.record_adoption(ref.writer, ref.batch, where)

        with self._staging.lock:  # no chunk is written to a file while it moves
            for path in to_move.values():
                fsync_path(path)
            rows = self._static.link(topic, key, sources, groups, before_adopt)
            for path in to_move.values():
                self._staging.forget(path)
        return rows

    def _plan(self, decision: pb.TxnDecision, ref: pb.TxnRef) -> list[tuple[int, list[tuple[str, int]]]]:
        """The appends prepare planned; for a decision prepared before plans existed, one append
        per staged chunk the decision lists (what such a broker did)."""
        plan = self._staging.plan(ref.writer, ref.batch)
        if plan is not None:
            return plan
        out = []
        for staging in decision.parts[self._name].refs if self._name in decision.parts else ():
            index = self._staging.index(ref.writer, ref.batch, staging.staging_id)
            wanted = set(staging.seqs)
            out += [(info.queue, [(staging.staging_id, seq)]) for seq, info in sorted(index.items()) if seq in wanted]
        return out

    def _key(self, ref: pb.TxnRef, members: list[tuple[str, int]]) -> str:
        """The idempotency key of one append: its first chunk's, with the number of further chunks."""
        staging_id, seq = members[0]
        key = f"{ref.writer}/{ref.batch}/{self._name}/{staging_id}/{seq}"
        return key if len(members) == 1 else f"{key}+{len(members) - 1}"

    def state(self, ref: pb.TxnRef) -> pb.TxnState:
        stored = self._staging.decision(ref.writer, ref.batch)
        if stored is None:
            return pb.TxnState(known=False)
        return pb.TxnState(known=True, committed=stored[1], decision=pb.TxnDecision.FromString(stored[0]))

    def _append(self, topic: str, queue: int, rows: PackedBatch, key: str) -> None:
        """Append to the logic queue's leader: here, or forwarded to the broker leading it now."""
        mapping = self._mapping_files.get(topic)
        if mapping is not None and mapping.leads(queue):
            # staged rows were validated by this broker at StageRows (and CRC-checked on disk)
            self._static.send(topic, queue, rows, key.encode(), dedup_across_segments=True, validated=True)
            return
        request = pb.SendRequest(
            topic=topic,
            queue_id=queue,
            batch=pb.MessageBatch(data=rows.data_bytes(), sizes=rows.sizes_bytes()),
            idempotency_key=key,
            dedup_across_segments=True,
        )
        self._peers.send_to_leader(topic, queue, request)
