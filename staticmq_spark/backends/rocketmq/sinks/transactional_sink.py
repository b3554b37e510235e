"""The exactly-once sink on Apache RocketMQ static topics, with RocketMQ's transactional messages.

Tasks (executors) send each row as a half message to the physical queue that leads the row's logic
queue (murmur3(key) mod totalQueues, as everywhere); halves are invisible to readers. Each task
attempt has its own token, carried by its halves as the user property `staticmq_txn`.
The driver's commit of micro-batch (writer, batch):

1. looks for a decision recorded for (writer, batch) already: found, this batch is a replay after
   a driver that died mid-commit. The recorded decision is completed (each target queue's tail,
   from where it ended when the decision was made, tells which of its halves are committed; only
   the others are committed now) and the replay's own halves are rolled back;
2. otherwise checks that every logic queue written still has the leader it had when its halves were
   sent (bname, physical queue, gen). A queue remapped in between: every half is rolled back and
   the commit fails, so the query stops and replays the batch on the new leaders when restarted;
3. records the decision (every half, each target queue's current end) in the decision topic;
4. commits every half (END_TRANSACTION), pipelined per broker.

Halves of failed or speculative task attempts never reach the driver: nothing commits them, and
the broker discards them after its transaction checks (past transactionTimeOut, transactionCheckMax x
transactionCheckInterval: about 7.5 min by default). transactionTimeOut must exceed a micro-batch's
time from its first half to its commit, or the checks copy every waiting half up to 16 times. See
docs/rocketmq.md for what an operator configures and the limits.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.backends.api import EXACTLY_ONCE, TaskWrite
from staticmq_spark.backends.rocketmq.client_instance import RocketMQClientInstance
from staticmq_spark.backends.rocketmq.leaders import Leader
from staticmq_spark.backends.rocketmq.sinks.decisions import Decision, DecisionLogs, HalfRun
from staticmq_spark.backends.rocketmq.sinks.direct_sink import ROW_ID, row_ids, with_row_ids
from staticmq_spark.backends.rocketmq.sinks.transaction_timeout import TimeoutWatch
from staticmq_spark.backends.rocketmq.sinks.transactions import PreparedHalves, end_halves, half_properties, send_halves
from staticmq_spark.backends.rocketmq.wire.batch_encode import properties_column, uniq_keys
from staticmq_spark.backends.rocketmq.wire.stored_messages import decode_stored
from staticmq_spark.backends.targets import target_runs
from staticmq_spark.backends.types import SinkRows, WriteSettings
from staticmq_spark.errors import ConflictError, StaticMQError
from staticmq_spark.protocol.rows import arrays

log = logging.getLogger(__name__)
J = TypeVar("J")
R = TypeVar("R")
TXN = "staticmq_txn"
PRODUCER_GROUP = "staticmq_sink"
SCAN_BATCH = 512


def _committed_rows(columns: pa.RecordBatch, token: str) -> set[int]:
    """Rows of task attempt `token` among pulled messages (their `staticmq_txn` and row id)."""
    props = columns.column("properties")
    txn = pc.map_lookup(props, TXN, "first")
    mine = pc.equal(txn, token).fill_null(False)
    ids = pc.map_lookup(props, ROW_ID, "first").filter(mine)
    rows = pc.extract_regex(ids, r":(?P<row>[0-9]+)$").field("row")
    return {int(r) for r in rows.to_pylist() if r is not None}


class RocketMQTransactionalSink:
    """Exactly once: halves from the tasks, a recorded decision and the commits from the driver."""

    guarantee = EXACTLY_ONCE

    def __init__(self, instance: RocketMQClientInstance) -> None:
        self.instance = instance
        self.client = instance.remoting
        self.leaders = instance.leaders
        self.timeouts = TimeoutWatch(self.client)
        self.decisions = DecisionLogs(instance)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="rocketmq-halves")

    # ------------------------------------------------------------------ executor side

    def total_queues(self, topic: str) -> int:
        return self.leaders.of(topic)[0]

    def write_task(
        self, settings: WriteSettings, writer: str, batch: int, partition: int, rows: Iterator[SinkRows]
    ) -> TaskWrite:
        token = uuid.uuid4().hex[:16].upper()
        started_ms = int(time.time() * 1000)
        _, leaders = self.leaders.of(settings.topic)
        runs: dict[int, list[tuple[np.ndarray, PreparedHalves]]] = {}
        written = 0
        for placed in rows:
            n = placed.num_rows
            numbers = placed.numbers
            ids = row_ids(writer, batch, partition, placed.first, n)
            user = with_row_ids(placed.properties, ids)
            uniq = uniq_keys(token, numbers)
            props = properties_column(placed.key, placed.tags, user, uniq)
            marked = half_properties(props, PRODUCER_GROUP, extra=f"{TXN}\x01{token}\x02")
            bodies = placed.value
            order, target_list = target_runs(placed.targets)
            if order is None:
                order = np.arange(n, dtype=np.int64)
            jobs: dict[str, list[tuple[int, Leader, np.ndarray]]] = {}  # per broker: its queues' rows
            for logic, a, b in target_list:
                lead = leaders.get(logic)
                if lead is None:
                    raise ConflictError(f"logic queue {logic} of {settings.topic!r} has no leader now (mid-remap?)")
                jobs.setdefault(lead.bname, []).append((logic, lead, order[a:b]))

            # every broker's halves at once (one connection each): the waits for the brokers overlap
            send = partial(self._send_jobs, settings.topic, bodies, marked, numbers)
            for sent in self._per_broker(send, list(jobs.values())):
                for logic, picked_rows, halves in sent:
                    runs.setdefault(logic, []).append((picked_rows, halves))
            written += n
        detail = [
            HalfRun(
                token=token,
                logic=logic,
                bname=leaders[logic].bname,
                queue=leaders[logic].queue,
                gen=leaders[logic].gen,
                rows=np.concatenate([r for r, _ in parts]),
                commit_log_offsets=np.concatenate([h.commit_log_offsets for _, h in parts]),
                table_offsets=np.concatenate([h.table_offsets for _, h in parts]),
                sent_ms=started_ms,
            )
            for logic, parts in sorted(runs.items())
        ]
        return TaskWrite(writer, batch, partition, written, detail)

    def _send_jobs(
        self,
        topic: str,
        bodies: pa.Array,
        marked: pa.Array,
        numbers: np.ndarray,
        jobs: list[tuple[int, Leader, np.ndarray]],
    ) -> list[tuple[int, np.ndarray, PreparedHalves]]:
        """One broker's halves: each of its logic queues' rows (`picked` positions of the batch)."""
        sent = []
        for logic, lead, picked in jobs:
            take = arrays.numbers(picked)
            halves = send_halves(
                self.client,
                lead.addr,
                lead.bname,
                topic,
                lead.queue,
                bodies.take(take),
                marked.take(take),
                PRODUCER_GROUP,
            )
            sent.append((logic, numbers[picked], halves))
        return sent

    def _per_broker(self, work: Callable[[J], R], jobs: list[J]) -> list[R]:
        """`work` on each broker's jobs, brokers in parallel (errors raised as they come)."""
        if len(jobs) <= 1:
            return [work(j) for j in jobs]
        return list(self._pool.map(work, jobs))

    # ------------------------------------------------------------------ driver side

    def commit(self, settings: WriteSettings, writer: str, batch: int, tasks: Sequence[TaskWrite]) -> int:
        runs = [run for t in tasks for run in (t.detail or [])]
        decisions = self.decisions.of(settings.decision_topic)
        recorded = decisions.find(settings.topic, writer, batch)
        if recorded is not None:
            log.warning(
                "micro-batch %d of %s was decided before (a driver stopped mid-commit): completing that "
                "decision and rolling back this run's %d half message(s)",
                batch,
                writer,
                sum(r.count for r in runs),
            )
            done = self._complete(settings.topic, recorded, fresh=False)
            self._end(settings.topic, runs, commit=False)
            return done
        if not runs:
            return 0
        _, now = self.leaders.of(settings.topic)
        moved = sorted(
            {
                r.logic
                for r in runs
                if (lead := now.get(r.logic)) is None or (lead.bname, lead.queue, lead.gen) != (r.bname, r.queue, r.gen)
            }
        )
        if moved:
            self._end(settings.topic, runs, commit=False)
            raise ConflictError(
                f"logic queue(s) {moved} of {settings.topic!r} were remapped while micro-batch {batch} was being "
                "written; its half messages were rolled back and nothing of it is visible. Restart the query: "
                "Spark replays the micro-batch onto the new leaders"
            )
        masters = self.instance.route(settings.topic, refresh=True).masters  # one route for the tails and the commits
        tails = self._tails(settings.topic, runs, masters)
        decision = Decision(settings.topic, writer, batch, runs, tails)
        decisions.record(decision)
        done = self._complete(settings.topic, decision, fresh=True, masters=masters)
        self.timeouts.check(batch, runs, masters)
        return done

    def _tails(
        self, topic: str, runs: Sequence[HalfRun], masters: dict[str, str] | None = None
    ) -> dict[tuple[str, int], int]:
        masters = masters if masters is not None else self.instance.route(topic, refresh=True).masters
        wanted: dict[str, set[int]] = {}
        for r in runs:
            wanted.setdefault(r.bname, set()).add(r.queue)
        tails = {}
        for bname, queues in wanted.items():
            bounds = self.client.physical_bounds(masters[bname], topic, sorted(queues))
            tails.update({(bname, q): hi for q, (_lo, hi) in bounds.items()})
        return tails

    def _complete(self, topic: str, decision: Decision, *, fresh: bool, masters: dict[str, str] | None = None) -> int:
        """Commit every half of the decision not committed yet; the rows committed now."""
        masters = masters if masters is not None else self.instance.route(topic, refresh=True).masters

        def commit_runs(runs: list[HalfRun]) -> tuple[int, list[str]]:
            done_now, refusals = 0, []
            for run in runs:
                keep = np.ones(run.count, dtype=bool)
                if not fresh:
                    tail = decision.tails.get((run.bname, run.queue), 0)
                    done = self._committed(topic, masters[run.bname], run, tail)
                    keep = ~np.isin(run.rows, np.fromiter(done, dtype=np.int64, count=len(done)))
                if not keep.any():
                    continue
                halves = PreparedHalves(run.commit_log_offsets[keep], run.table_offsets[keep])
                uniq = uniq_keys(run.token, run.rows[keep])
                refused = end_halves(self.client, masters[run.bname], topic, PRODUCER_GROUP, halves, uniq, commit=True)
                done_now += int(keep.sum()) - len(refused)
                refusals += [f"{run.bname}/{run.queue}: {text}" for text in refused[:3]]
            return done_now, refusals

        by_broker: dict[str, list[HalfRun]] = {}
        for run in decision.runs:
            by_broker.setdefault(run.bname, []).append(run)
        committed = 0
        failures: list[str] = []
        for done_now, refusals in self._per_broker(commit_runs, list(by_broker.values())):
            committed += done_now
            failures += refusals
        if failures:
            raise StaticMQError(
                f"committing micro-batch {decision.batch}: {len(failures)} half message(s) refused "
                f"(e.g. {failures[0]}); the decision is recorded, a restarted query completes it"
            )
        return committed

    def _committed(self, topic: str, addr: str, run: HalfRun, tail: int) -> set[int]:
        """Rows of `run` already in its target queue, read from where the queue ended at the decision."""
        found: set[int] = set()
        offset = tail
        end = self.client.max_offset(addr, topic, run.queue, logic=False)
        while offset < end:
            answer = self.client.pull(addr, topic, run.queue, offset, SCAN_BATCH, logic=False, bname=run.bname)
            if not answer.body or answer.next_offset <= offset:
                break
            found |= _committed_rows(decode_stored(answer.body).columns, run.token)
            offset = answer.next_offset
        return found

    def _end(self, topic: str, runs: Sequence[HalfRun], *, commit: bool) -> None:
        """Roll back (or commit) halves, best effort: a half left behind is discarded by its broker."""
        try:
            masters = self.instance.route(topic, refresh=True).masters
        except StaticMQError as exc:
            log.warning("could not roll back half messages of %s: %s", topic, exc.message)
            return
        for run in runs:
            addr = masters.get(run.bname)
            if addr is None:
                continue
            halves = PreparedHalves(run.commit_log_offsets, run.table_offsets)
            try:
                refused = end_halves(self.client, addr, topic, PRODUCER_GROUP, halves, run.uniq_keys(), commit=commit)
            except StaticMQError as exc:
                log.warning("rollback of %d half message(s) on %s failed: %s", run.count, run.bname, exc.message)
                continue
            if refused:
                log.warning("%d rollback(s) on %s refused, e.g. %s", len(refused), run.bname, refused[0])

    def aborted(self) -> str:
        return "its half messages are never committed (the brokers discard them); nothing of it is visible"

    def close(self) -> None:
        self._pool.shutdown(wait=False)  # the connections are the backend's
