"""Driver side of the sink's two-phase commit (see broker_stub/broker/sink_service.py).

commit(batch): look for a decision a previous run already stored for this (writer, batch) on any
live broker and re-drive it if there is one; else build the decision from the tasks' commit
messages. Prepare it on every participant, then commit on every participant (the participants
of a phase in parallel; the commit phase starts once every prepare has succeeded). All calls are
idempotent, so a commit interrupted anywhere is completed by the next attempt or the replay.

A broker that the name server still lists but that does not answer could hold a stored
decision, so the commit waits (retrying up to sendTimeoutMs) until it answers or the name server
expires it: correctness before progress.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TypeVar

from staticmq_spark.backends.api import TaskWrite
from staticmq_spark.backends.retry import with_retries
from staticmq_spark.backends.staticmq.admin import StaticMQAdmin
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.types import WriteSettings
from staticmq_spark.errors import BrokerUnavailableError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class StagedTask:
    """What one task staged (the TaskWrite's detail): per broker, the chunk seqs and row count of
    its staging id."""

    staging_id: str
    parts: dict[str, tuple[list[int], int]]


def decision_of(topic: str, writer: str, batch: int, tasks: Sequence[TaskWrite]) -> pb.TxnDecision:
    parts: dict[str, list[pb.StagingRef]] = {}
    for task in tasks:
        staged = task.detail
        if not isinstance(staged, StagedTask):
            continue
        for broker, (seqs, rows) in sorted(staged.parts.items()):
            parts.setdefault(broker, []).append(
                pb.StagingRef(staging_id=staged.staging_id, chunks=len(seqs), rows=rows, seqs=sorted(seqs))
            )
    return pb.TxnDecision(
        writer=writer,
        batch=batch,
        topic=topic,
        parts={b: pb.StagingList(refs=sorted(refs, key=lambda r: r.staging_id)) for b, refs in parts.items()},
    )


def commit_batch(
    instance: StaticMQClientInstance, opts: WriteSettings, writer: str, batch: int, tasks: Sequence[TaskWrite]
) -> int:
    """Make the batch's staged rows visible, exactly once; returns the rows committed now."""
    fresh = decision_of(opts.topic, writer, batch, tasks)

    def attempt() -> int:
        with StaticMQAdmin(instance, wait_for_ready=False) as admin:
            live = {b.name: b.addr for b in admin.cluster_info()}
            decision = _stored_decision(admin, live, writer, batch) or fresh
            missing = sorted(set(decision.parts) - set(live))
            if missing:
                raise BrokerUnavailableError(f"sink commit of batch {batch}: participant broker(s) {missing} are down")
            participants = sorted(decision.parts)
            _on_each(participants, lambda b: admin.call(b, admin.stub(live[b]).PrepareTxn, decision))
            ref = pb.TxnRef(writer=writer, batch=batch)
            return sum(_on_each(participants, lambda b: admin.call(b, admin.stub(live[b]).CommitTxn, ref).rows))

    if not fresh.parts:
        return 0
    rows = with_retries(f"committing sink batch {batch}", attempt, opts.send_timeout_ms / 1000)
    log.info("staticmq sink: batch %d of %s committed (%d rows written now)", batch, writer, rows)
    return rows


def _on_each(brokers: list[str], call: Callable[[str], T]) -> list[T]:
    """`call(broker)` on every broker at once (each waits for its own disk); all of them are
    waited for, then the first failure in broker order is raised."""
    if len(brokers) == 1:
        return [call(brokers[0])]
    with ThreadPoolExecutor(max_workers=min(len(brokers), 16), thread_name_prefix="staticmq-commit") as pool:
        futures = [pool.submit(call, b) for b in brokers]
        wait(futures)
    return [f.result() for f in futures]


def _stored_decision(admin: StaticMQAdmin, live: dict[str, str], writer: str, batch: int) -> pb.TxnDecision | None:
    ref = pb.TxnRef(writer=writer, batch=batch)
    for name, addr in sorted(live.items()):
        state = admin.call(name, admin.stub(addr).GetTxn, ref)
        if state.known:
            return state.decision
    return None
