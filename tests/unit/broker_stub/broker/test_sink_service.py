"""The broker half of the sink's exactly-once protocol (SPEC section 8: a query restarted from its
checkpoint leaves every row in the topic exactly once) at the seam under the BrokerServicer:
`SinkService` stage / prepare / commit / state on one broker opened in-process on a temp data dir
(tests/support/broker_services.py) - no gRPC, no Spark.

Staged rows are invisible until their transaction commits; a commit makes exactly the decided
rows visible, once, in staging order; committing again (also after a restart) writes nothing
more. Each behaviour runs with both ways of committing: copying the staged rows (small
transactions) and linking the staging files into the commit log (large ones)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from broker_stub.broker.app import BrokerApp
from staticmq_spark.errors import (
    ConflictError,
    InvalidArgumentError,
    QueueNotFoundError,
    StaticMQError,
    StaticTopicRefusedError,
)
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.rows.encode import encode_messages
from staticmq_spark.protocol.wire.stage_request import StageChunk
from tests.support.broker_services import BROKER, SMALL_STORE, plain_topic, running_broker, static_topic, stored_bodies

TOPIC, WRITER = "events", "query-1"
QUEUES = 3
COMMIT_MODES = {"copy": SMALL_STORE, "link": replace(SMALL_STORE, sink_link_min_bytes=0)}


class Sink:
    """A broker with a static topic of QUEUES logic queues (all led here) and its sink service."""

    def __init__(self, app: BrokerApp) -> None:
        self.app = app
        self.service = app.sink

    def stage(
        self,
        queue: int,
        rows: list[bytes],
        *,
        seq: int = 0,
        staging_id: str = "task-0",
        batch: int = 0,
        writer: str = WRITER,
        topic: str = TOPIC,
    ) -> None:
        packed = encode_messages(rows)
        request = pb.StageRequest(
            writer=writer,
            batch=batch,
            staging_id=staging_id,
            topic=topic,
            queue_id=queue,
            seq=seq,
            rows=pb.MessageBatch(data=packed.data_bytes(), sizes=packed.sizes_bytes()),
        )
        self.service.stage(StageChunk.from_message(request))

    def prepare(self, refs: dict[str, tuple[list[int], int]], batch: int = 0) -> pb.TxnDecision:
        """Decide the batch: staging id -> (its seqs, its rows), all staged on this broker."""
        decision = decision_of(refs, batch)
        self.service.prepare(decision)
        return decision

    def commit(self, batch: int = 0) -> pb.TxnState:
        return self.service.commit(pb.TxnRef(writer=WRITER, batch=batch))

    def state(self, batch: int = 0) -> pb.TxnState:
        return self.service.state(pb.TxnRef(writer=WRITER, batch=batch))

    def visible(self) -> dict[int, list[bytes]]:
        """The rows of every logic queue (logic queue q is physical queue q here)."""
        return {q: stored_bodies(self.app, TOPIC, q) for q in range(QUEUES)}


def decision_of(refs: dict[str, tuple[list[int], int]], batch: int = 0) -> pb.TxnDecision:
    staged = [
        pb.StagingRef(staging_id=s, chunks=len(seqs), rows=rows, seqs=seqs) for s, (seqs, rows) in sorted(refs.items())
    ]
    return pb.TxnDecision(writer=WRITER, batch=batch, topic=TOPIC, parts={BROKER: pb.StagingList(refs=staged)})


NOTHING: dict[int, list[bytes]] = {q: [] for q in range(QUEUES)}


@pytest.fixture(params=sorted(COMMIT_MODES))
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sink]:
    with running_broker(tmp_path / BROKER, store=COMMIT_MODES[request.param]) as app:
        static_topic(app, TOPIC, QUEUES)
        plain_topic(app, "plain")
        yield Sink(app)


def test_staged_rows_are_invisible_until_the_transaction_commits(sink: Sink) -> None:
    sink.stage(0, [b"a", b"b"])
    assert sink.visible() == NOTHING
    assert not sink.state().known
    sink.prepare({"task-0": ([0], 2)})
    assert sink.visible() == NOTHING, "prepared is not committed"
    assert sink.state().known and not sink.state().committed


def test_a_commit_makes_every_decided_row_visible_once_in_staging_order(sink: Sink) -> None:
    sink.stage(0, [b"a1", b"a2"], staging_id="task-a", seq=0)
    sink.stage(2, [b"a3"], staging_id="task-a", seq=1)
    sink.stage(0, [b"a4"], staging_id="task-a", seq=2)
    sink.stage(0, [b"b1"], staging_id="task-b", seq=0)
    sink.stage(1, [b"b2", b"b3"], staging_id="task-b", seq=1)
    sink.prepare({"task-a": ([0, 1, 2], 4), "task-b": ([0, 1], 3)})

    state = sink.commit()

    assert state.committed and state.rows == 7
    assert sink.visible() == {0: [b"a1", b"a2", b"a4", b"b1"], 1: [b"b2", b"b3"], 2: [b"a3"]}
    assert sink.state().committed


def test_a_repeated_commit_is_idempotent(sink: Sink) -> None:
    sink.stage(1, [b"a", b"b"])
    sink.prepare({"task-0": ([0], 2)})
    assert sink.commit().rows == 2

    again = sink.commit()

    assert again.committed and again.rows == 0, "nothing written the second time"
    assert sink.visible() == {0: [], 1: [b"a", b"b"], 2: []}


@pytest.mark.parametrize("mode", sorted(COMMIT_MODES))
def test_a_commit_repeated_after_a_broker_restart_writes_nothing_again(tmp_path: Path, mode: str) -> None:
    with running_broker(tmp_path / BROKER, store=COMMIT_MODES[mode]) as app:
        static_topic(app, TOPIC, QUEUES)
        sink = Sink(app)
        sink.stage(1, [b"a", b"b"])
        sink.prepare({"task-0": ([0], 2)})
        assert sink.commit().rows == 2
    with running_broker(tmp_path / BROKER, store=COMMIT_MODES[mode]) as app:
        restarted = Sink(app)
        assert restarted.state().committed
        assert restarted.commit().rows == 0
        assert restarted.visible() == {0: [], 1: [b"a", b"b"], 2: []}


def test_a_chunk_staged_again_is_stored_once(sink: Sink) -> None:
    sink.stage(0, [b"a"], seq=0)
    sink.stage(0, [b"a"], seq=0)  # a task retried the request
    sink.stage(0, [b"b"], seq=1)
    sink.prepare({"task-0": ([0, 1], 2)})
    assert sink.commit().rows == 2
    assert sink.visible()[0] == [b"a", b"b"]


def test_only_the_chunks_the_decision_lists_become_visible(sink: Sink) -> None:
    sink.stage(0, [b"kept"], staging_id="task-0", seq=0)
    sink.stage(0, [b"dropped"], staging_id="task-0", seq=1)  # e.g. a task attempt Spark discarded
    sink.stage(1, [b"also dropped"], staging_id="task-0-attempt-1", seq=0)
    sink.prepare({"task-0": ([0], 1)})
    assert sink.commit().rows == 1
    assert sink.visible() == {0: [b"kept"], 1: [], 2: []}


def test_a_prepared_decision_never_changes(sink: Sink) -> None:
    sink.stage(0, [b"a"], seq=0)
    sink.stage(0, [b"b"], seq=1)
    decision = sink.prepare({"task-0": ([0], 1)})
    sink.service.prepare(decision)  # the same decision again (a replayed driver): accepted
    with pytest.raises(ConflictError, match="prepared with another decision"):
        sink.prepare({"task-0": ([0, 1], 2)})
    with pytest.raises(ConflictError, match="already prepared"):
        sink.stage(0, [b"late"], seq=2)
    assert sink.commit().rows == 1
    assert sink.visible()[0] == [b"a"]


def test_committing_a_transaction_that_was_never_prepared_is_refused(sink: Sink) -> None:
    sink.stage(0, [b"a"])
    with pytest.raises(ConflictError, match="never prepared"):
        sink.commit()
    assert sink.visible() == NOTHING


def test_preparing_rows_the_broker_does_not_hold_is_refused(sink: Sink) -> None:
    sink.stage(0, [b"a"], seq=0)
    with pytest.raises(ConflictError, match="lost staged rows"):
        sink.prepare({"task-0": ([0, 1], 2)})
    assert not sink.state().known, "a refused prepare stores no decision"


def test_a_commit_drops_the_staging_of_earlier_batches_which_can_never_commit(sink: Sink) -> None:
    sink.stage(0, [b"abandoned"], batch=0)
    sink.stage(1, [b"next"], batch=1)
    sink.prepare({"task-0": ([0], 1)}, batch=1)
    assert sink.commit(batch=1).rows == 1
    with pytest.raises(ConflictError, match="lost staged rows"):
        sink.prepare({"task-0": ([0], 1)}, batch=0)
    assert sink.visible() == {0: [], 1: [b"next"], 2: []}


# (rule, fields of the StageRequest) -> the refusal and the gRPC status the servicer answers
STAGE_REFUSALS = [
    ("a logic queue the topic does not have", {"queue": QUEUES}, QueueNotFoundError, "NOT_FOUND"),
    ("a negative logic queue", {"queue": -1}, QueueNotFoundError, "NOT_FOUND"),
    ("a plain topic", {"topic": "plain"}, StaticTopicRefusedError, "FAILED_PRECONDITION"),
    ("a topic the broker does not have", {"topic": "nowhere"}, StaticTopicRefusedError, "FAILED_PRECONDITION"),
    ("a negative batch", {"batch": -1}, InvalidArgumentError, "INVALID_ARGUMENT"),
    ("a negative seq", {"seq": -1}, InvalidArgumentError, "INVALID_ARGUMENT"),
    ("a writer name that is not a file name", {"writer": "../up"}, InvalidArgumentError, "INVALID_ARGUMENT"),
    ("a staging id that is not a file name", {"staging_id": "a/b"}, InvalidArgumentError, "INVALID_ARGUMENT"),
]


@pytest.mark.parametrize(("rule", "fields", "error", "status"), STAGE_REFUSALS, ids=[r[0] for r in STAGE_REFUSALS])
def test_a_bad_stage_request_is_refused(
    sink: Sink, rule: str, fields: dict[str, object], error: type[StaticMQError], status: str
) -> None:
    wanted: dict[str, object] = {"queue": 0, **fields}
    queue = wanted.pop("queue")
    with pytest.raises(error) as refused:
        sink.stage(queue, [b"a"], **wanted)  # type: ignore[arg-type]
    assert refused.value.grpc_status == status, rule
    assert sink.visible() == NOTHING


def test_a_chunk_over_the_brokers_batch_limit_is_refused(sink: Sink) -> None:
    limit = sink.app.config.store.max_batch_bytes
    with pytest.raises(InvalidArgumentError, match="lower the sink option requestBytes"):
        sink.stage(0, [b"x" * (limit // 2), b"y" * (limit // 2)])
