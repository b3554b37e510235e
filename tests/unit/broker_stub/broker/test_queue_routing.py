"""Which queues a request addresses, decided once per request: a static topic's logic queues
unless the request names a physical queue; else this broker's queues as they are. And the checks
of a consumer offset commit, the same on both sides."""

from __future__ import annotations

from typing import Any

import pytest

from broker_stub.broker.queue_requests import BrokerQueues, LogicQueues, QueueRouter, check_commit
from staticmq_spark.errors import InvalidArgumentError, QueueNotFoundError


class StaticTopics:
    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def is_static(self, topic: str) -> bool:
        return topic in self.names


def router() -> QueueRouter:
    unused: Any = None
    return QueueRouter(StaticTopics("orders"), unused, unused, unused)  # type: ignore[arg-type]


def test_a_static_topics_request_goes_to_its_logic_queues() -> None:
    assert isinstance(router().route("orders"), LogicQueues)


def test_a_request_naming_a_physical_queue_of_a_static_topic_goes_to_that_queue_as_it_is() -> None:
    queues = router().route("orders", physical=True)
    assert isinstance(queues, BrokerQueues) and queues.physical


@pytest.mark.parametrize("physical", [False, True])
def test_a_plain_topics_request_goes_to_its_queues(physical: bool) -> None:
    queues = router().route("events", physical)
    assert isinstance(queues, BrokerQueues) and queues.physical is physical


def test_a_commit_of_a_negative_offset_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match=r"committed offset must be >= 0, got -1"):
        check_commit("orders", 0, -1, 4, "logic queues")


@pytest.mark.parametrize("queue_id", [-1, 4])
def test_a_commit_to_a_queue_the_topic_does_not_have_is_refused(queue_id: int) -> None:
    with pytest.raises(
        QueueNotFoundError, match=rf"topic 'orders' has 4 logic queues: queue {queue_id} does not exist"
    ):
        check_commit("orders", queue_id, 0, 4, "logic queues")


def test_a_commit_inside_the_topic_passes() -> None:
    check_commit("orders", 3, 0, 4, "queues on this broker")
