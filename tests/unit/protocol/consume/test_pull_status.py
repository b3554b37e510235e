"""One pull status end to end: a store read's status becomes the pull status in one conversion,
the broker's pull answer carries it to the wire as its number, and a receiver (another broker's
segment read, the client) reads it back unchanged; the status lives in the pure protocol layer,
which the broker imports without the client's cluster layer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from broker_stub.broker.message_service import PullOutcome
from broker_stub.broker.segment_access import _from_remote
from broker_stub.broker.servicer import encode_pull
from broker_stub.store.store_results import ReadResult, ReadStatus, pull_status
from staticmq_spark.backends.staticmq.answers import pull_result
from staticmq_spark.client import PullStatus as ClientPullStatus
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.consume.pull_status import PullStatus as ClusterPullStatus
from staticmq_spark.protocol.pb import staticmq_pb2 as pb

STORE_READS = [
    (ReadStatus.FOUND, PullStatus.FOUND),
    (ReadStatus.NO_NEW_MESSAGE, PullStatus.NO_NEW_MESSAGE),
    (ReadStatus.OFFSET_TOO_SMALL, PullStatus.OFFSET_MOVED),
    (ReadStatus.OFFSET_OVERFLOW, PullStatus.OFFSET_MOVED),
]
BROKER_ANSWERS = [PullStatus.FOUND, PullStatus.NO_NEW_MESSAGE, PullStatus.OFFSET_MOVED, PullStatus.NOT_FOUND]


@pytest.mark.parametrize(("read", "expected"), STORE_READS, ids=[r.name for r, _ in STORE_READS])
def test_a_store_read_outside_the_queue_is_offset_moved_and_every_other_keeps_its_status(
    read: ReadStatus, expected: PullStatus
) -> None:
    assert pull_status(read) is expected
    assert ReadResult(read, 5, 2, 9).pull_status is expected


def test_every_wire_pull_status_has_the_number_of_the_pull_status_of_its_name() -> None:
    for value in pb.PullStatus.DESCRIPTOR.values:
        assert PullStatus[value.name] == value.number, value.name


def test_the_client_the_cluster_layer_and_the_broker_share_one_pull_status() -> None:
    assert ClusterPullStatus is PullStatus
    assert ClientPullStatus is PullStatus


@pytest.mark.parametrize("status", BROKER_ANSWERS, ids=[s.name for s in BROKER_ANSWERS])
def test_a_pull_answer_reaches_another_broker_and_the_client_with_its_status_unchanged(status: PullStatus) -> None:
    outcome = PullOutcome(status=status, next_offset=7, min_offset=3, max_offset=9)
    wire = pb.PullResponse.FromString(encode_pull(outcome).SerializeToString())
    assert wire.status == int(status)
    remote = _from_remote(wire)
    assert (remote.status, remote.next_offset, remote.min_offset, remote.max_offset) == (status, 7, 3, 9)
    assert pull_result("orders", 0, wire).status is status


def test_the_broker_imports_the_pull_status_without_the_client_cluster_layer() -> None:
    code = (
        "import sys, broker_stub.broker.app, broker_stub.broker.servicer, broker_stub.broker.consume_servicer\n"
        "print(sorted(m for m in sys.modules if m.startswith('staticmq_spark.backends')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
