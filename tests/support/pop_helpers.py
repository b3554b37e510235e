"""Helpers for pop tests: a broker config file, draining a group, waiting for routes."""

from __future__ import annotations

import time
from pathlib import Path

from staticmq_spark.client import Admin, PopConsumer, PopMessage
from staticmq_spark.errors import TopicNotFoundError
from tests.support.waiting import wait_until


def broker_config(tmp_path: Path, **pop: object) -> Path:
    """A TOML config whose [broker] section sets pop options (e.g. pop_max_reconsume_times=2)."""
    path = tmp_path / "broker.toml"
    lines = ["[broker]"]
    for key, value in pop.items():
        lines.append(f"{key} = {str(value).lower() if isinstance(value, bool) else value}")
    path.write_text("\n".join(lines) + "\n")
    return path


def drain(consumer: PopConsumer, seconds: float, *, ack: bool = True, batch: int = 64) -> list[PopMessage]:
    """Receive (and ack) for `seconds`; every message delivered, in delivery order."""
    got: list[PopMessage] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        messages = consumer.receive(batch, 30.0, wait_s=min(0.5, max(0.05, deadline - time.monotonic())))
        got.extend(messages)
        if ack and messages:
            result = consumer.ack_batch(messages)
            assert not result.refused, result.refused[:3]
    return got


def wait_topic(namesrv: str, topic: str, timeout: float = 10) -> None:
    """Block until the name server routes `topic` (e.g. a DLQ the broker just created)."""
    with Admin(namesrv) as admin:
        wait_until(
            lambda: admin.route_view(topic),
            timeout,
            interval_s=0.1,
            message=f"the name server to route {topic}",
            ignore=(TopicNotFoundError,),
        )


def wait_leader(namesrv: str, topic: str, queue: int, broker: str, timeout: float = 10) -> None:
    """Block until the route of static `topic` names `broker` as the leader of `queue`."""
    with Admin(namesrv) as admin:
        wait_until(
            lambda: admin.route_view(topic).write_queues[queue].broker == broker,
            timeout,
            message=f"{broker} to lead queue {queue} of {topic}",
        )
