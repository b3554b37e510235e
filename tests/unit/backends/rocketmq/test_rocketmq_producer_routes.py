"""The RocketMQ producer refreshes a cached route that names no live leader (found by the soak run:
a route read while the leader broker was down made every later send fail at once, for good)."""

from __future__ import annotations

from typing import Any

from staticmq_spark.backends.rocketmq.producer import RocketMQProducer
from staticmq_spark.backends.rocketmq.wire.remoting import SendAnswer
from staticmq_spark.backends.rocketmq.wire.routes import TopicRoute


class FakeClient:
    """The client instance's part the producer uses: its (cached) routes and the remoting calls."""

    def __init__(self, routes: list[TopicRoute]) -> None:
        self.routes = routes
        self.route_calls = 0
        self.sent: list[tuple[str, str, int]] = []
        self.remoting = self
        self._cached: TopicRoute | None = None

    def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        if self._cached is None or refresh:
            self.route_calls += 1
            self._cached = self.routes[min(self.route_calls - 1, len(self.routes) - 1)]
        return self._cached

    def send(self, addr: str, bname: str, topic: str, queue: int, body: bytes, props: str, **kw: Any) -> SendAnswer:
        self.sent.append((addr, bname, queue))
        return SendAnswer(queue=queue, queue_offset=7, msg_id="", degraded="")

    def with_timeout(self, timeout_s: float) -> FakeClient:
        return self


def test_a_route_cached_while_the_leader_was_down_is_refreshed_on_the_next_send() -> None:
    down = TopicRoute("t", masters={"broker-b": "127.0.0.1:2"}, total_queues=1, leaders={0: "broker-a"})
    back = TopicRoute(
        "t", masters={"broker-a": "127.0.0.1:1", "broker-b": "127.0.0.1:2"}, total_queues=1, leaders={0: "broker-a"}
    )
    client = FakeClient([down, back])
    producer = RocketMQProducer(client, send_timeout_s=5)  # type: ignore[arg-type]
    (result,) = producer.send_batch("t", [b"x"], queue=0)
    assert (result.broker, result.queue_offset) == ("broker-a", 7)
    assert client.sent == [("127.0.0.1:1", "broker-a", 0)]
    assert client.route_calls == 2
