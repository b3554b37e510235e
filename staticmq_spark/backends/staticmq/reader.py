"""Reading static topics from a staticmq cluster (broker_stub's gRPC): snapshots, physical pulls with
one read-ahead per queue, offsets by time and group offsets."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor

from staticmq_spark.backends.read_ahead import ReadAhead
from staticmq_spark.backends.retry import retry_read
from staticmq_spark.backends.staticmq.admin import StaticMQAdmin
from staticmq_spark.backends.staticmq.answers import packed_columns
from staticmq_spark.backends.staticmq.client_instance import StaticMQClientInstance
from staticmq_spark.backends.staticmq.pull_consumer import StaticMQPullConsumer
from staticmq_spark.backends.staticmq.rpc import invoke
from staticmq_spark.backends.types import BrokerState, Capabilities, PhysicalRead
from staticmq_spark.errors import StaticMQError
from staticmq_spark.protocol.consume.pull_status import PullStatus
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.wire.pull_response import decode_pull_response

log = logging.getLogger(__name__)
PULL_TIMEOUT_S = 30.0


class StaticMQReader:
    capabilities = Capabilities(two_phase_staging=True, pop=True, exclusive=True)  # the backend's too (StaticMQBackend)

    def __init__(self, instance: StaticMQClientInstance) -> None:
        self.address = instance.address
        self._instance = instance
        self.admin = StaticMQAdmin(instance, wait_for_ready=False)
        self._consumers: dict[str, StaticMQPullConsumer] = {}
        self._addrs: dict[str, str] = {}
        self._ahead: ReadAhead[Future[bytes]] = ReadAhead(lambda future: future.cancel())
        # One long-lived thread makes the read-ahead calls: a gRPC `future()` on a sync channel
        # starts a new channel thread whenever none is running, which cost a worker ~15% of its CPU.
        self._ahead_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="staticmq-read-ahead")

    def _consumer(self, group: str = "") -> StaticMQPullConsumer:
        consumer = self._consumers.get(group)
        if consumer is None:
            consumer = self._consumers[group] = StaticMQPullConsumer(self._instance, group=group)
        return consumer

    def gather(self, topic: str, brokers: Mapping[str, str] | None = None) -> dict[str, BrokerState]:
        return self.admin.static.gather(topic) if brokers is None else self.admin.static.gather_at(topic, brokers)

    def live_brokers(self) -> dict[str, str]:
        return {b.name: b.addr for b in self.admin.cluster_info()}

    def topic_names(self) -> set[str]:
        """The static topics any live broker holds (its topic configs say which are static)."""
        names: set[str] = set()
        for broker in self.admin.cluster_info():
            names.update(cfg.name for cfg in self.admin.topic_configs(broker.addr) if cfg.is_static)
        return names

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int) -> int:
        return self._consumer().offset_for_timestamp(topic, queue, timestamp_ms)

    def commit_offset(self, group: str, topic: str, queue: int, offset: int) -> None:
        self._consumer(group).commit(topic, queue, offset)

    def committed_offset(self, group: str, topic: str, queue: int) -> int | None:
        return self._consumer(group).committed(topic, queue)

    def _addr(self, bname: str, planned: str, refresh: bool) -> str:
        if refresh or bname not in self._addrs:
            try:
                self._addrs.update({b.name: b.addr for b in self.admin.cluster_info()})
            except StaticMQError as exc:
                log.debug("cluster info unavailable: %s", exc.message)
        return self._addrs.get(bname, planned)

    def pull_physical(
        self,
        topic: str,
        bname: str,
        addr: str,
        queue: int,
        offset: int,
        max_messages: int,
        retry_timeout_s: float,
        include_properties: bool = True,
        until: int | None = None,
        subscription: str = "",
    ) -> PhysicalRead:
        request = pb.PullRequest(
            topic=topic,
            queue_id=queue,
            offset=offset,
            max_messages=max_messages,
            physical=True,
            subscription=subscription,
        )
        ahead = self._ahead.take((topic, bname, queue, offset))
        target = self._addr(bname, addr, refresh=False)

        def attempt(n: int) -> bytes:
            nonlocal target
            if n == 0 and ahead is not None:
                return ahead.result()
            target = self._addr(bname, addr, refresh=n > 0)
            return invoke(bname, self.admin.channels.raw_pull(target), request, PULL_TIMEOUT_S, wait_for_ready=False)

        raw = retry_read(f"reading {topic} queue {queue} on {bname}", retry_timeout_s, attempt)
        resp, data, sizes = decode_pull_response(raw)
        if resp.status == pb.FOUND and until is not None and offset < resp.next_offset < until and not subscription:
            count = min(max_messages, until - resp.next_offset)
            self._pull_ahead(target, topic, bname, queue, resp.next_offset, count)
        status = PullStatus(resp.status)
        if status is not PullStatus.FOUND:
            return PhysicalRead(status, resp.next_offset, None)
        return PhysicalRead(
            status, resp.next_offset, packed_columns(resp, properties=include_properties, batch=(data, sizes))
        )

    def _pull_ahead(self, target: str, topic: str, bname: str, queue: int, offset: int, count: int) -> None:
        """Ask for the next range of a planned read now: the broker reads it while this answer is
        decoded (one request in flight per queue being read)."""
        request = pb.PullRequest(topic=topic, queue_id=queue, offset=offset, max_messages=count, physical=True)
        method = self.admin.channels.raw_pull(target)
        future = self._ahead_thread.submit(invoke, bname, method, request, PULL_TIMEOUT_S, wait_for_ready=False)
        self._ahead.put((topic, bname, queue, offset), future)

    def close(self) -> None:
        self._ahead.clear()
        self._ahead_thread.shutdown(wait=False, cancel_futures=True)
        for consumer in self._consumers.values():
            consumer.close()
        self.admin.close()
