"""Executor side of the source: read a partition's segments from their brokers with physical
pulls and yield Arrow batches. Clients live per Python worker process (read() runs on a pickled
reader: nothing but the partition reaches it)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pyarrow as pa

from staticmq_spark.client.rpc import Channels, invoke
from staticmq_spark.errors import BrokerUnavailableError, DataLossError, StaticMQError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.source.partition import QueuePartition, SegmentRef
from staticmq_spark.source.schema import arrow_schema, to_spark_batch

log = logging.getLogger(__name__)
_READERS: dict[str, PhysicalReader] = {}
_READERS_LOCK = threading.Lock()


class PhysicalReader:
    """Pulls physical queues of any broker; retries brokers that are down or restarting."""

    def __init__(self, namesrv: str) -> None:
        self._namesrv = [a.strip() for a in namesrv.split(";") if a.strip()]
        self._channels = Channels()
        self._addrs: dict[str, str] = {}

    def _addr(self, seg: SegmentRef, refresh: bool) -> str:
        if refresh or seg.bname not in self._addrs:
            for ns in self._namesrv:
                try:
                    info = invoke("name server", self._channels.namesrv(ns).GetClusterInfo, pb.Empty(), 5)
                except StaticMQError:
                    continue
                self._addrs.update({b.name: b.addr for b in info.brokers})
                break
        return self._addrs.get(seg.bname, seg.addr)

    def pull(
        self, topic: str, seg: SegmentRef, offset: int, max_messages: int, retry_timeout_s: float
    ) -> pb.PullResponse:
        request = pb.PullRequest(
            topic=topic, queue_id=seg.queue, offset=offset, max_messages=max_messages, physical=True
        )
        deadline = time.monotonic() + retry_timeout_s
        attempt = 0
        while True:
            addr = self._addr(seg, refresh=attempt > 0)
            try:
                return invoke(seg.bname, self._channels.broker(addr).Pull, request, 30, wait_for_ready=False)
            except StaticMQError as exc:
                if not exc.retriable or time.monotonic() > deadline:
                    raise BrokerUnavailableError(
                        f"reading {topic} queue {seg.queue} on {seg.bname} failed after {attempt + 1} attempt(s): "
                        f"{exc.message}"
                    ) from None
                attempt += 1
                log.warning("pull from %s failed (%s); retrying", seg.bname, exc.message)
                time.sleep(min(2.0, 0.1 * 2**attempt))


def physical_reader(namesrv: str) -> PhysicalReader:
    with _READERS_LOCK:
        reader = _READERS.get(namesrv)
        if reader is None:
            reader = _READERS[namesrv] = PhysicalReader(namesrv)
        return reader


def read_partition(p: QueuePartition) -> Iterator[pa.RecordBatch]:
    s = p.settings
    reader = physical_reader(s.namesrv)
    schema = arrow_schema(s.include_properties)
    for seg in p.segments:
        offset = seg.physical_start
        while offset < seg.physical_end:
            want = min(s.pull_batch_size, seg.physical_end - offset)
            resp = reader.pull(s.topic, seg, offset, want, s.retry_timeout_ms / 1000)
            if resp.status == pb.FOUND:
                if resp.base_offset > offset:
                    _data_loss(p, seg, offset, resp.base_offset)
                yield to_spark_batch(
                    resp,
                    topic=s.topic,
                    logic_queue=p.queue,
                    offset_delta=seg.offset_delta,
                    bname=seg.bname,
                    schema=schema,
                    include_properties=s.include_properties,
                )
                offset = resp.next_offset
            elif resp.status == pb.OFFSET_MOVED and resp.next_offset > offset:
                _data_loss(p, seg, offset, min(resp.next_offset, seg.physical_end))
                offset = resp.next_offset
            else:  # the planned messages are not there (the broker lost unflushed data)
                _data_loss(p, seg, offset, seg.physical_end)
                break


def _data_loss(p: QueuePartition, seg: SegmentRef, physical_from: int, physical_to: int) -> None:
    lo, hi = physical_from + seg.offset_delta, physical_to + seg.offset_delta
    message = (
        f"topic {p.settings.topic!r} logic queue {p.queue}: messages at logic offsets [{lo}, {hi}) "
        f"(physical {seg.bname}/{seg.queue} [{physical_from}, {physical_to})) were removed before they were read"
    )
    if p.settings.fail_on_data_loss:
        raise DataLossError(message + " (failOnDataLoss=true; set failOnDataLoss=false to skip lost messages)")
    log.warning("%s; skipped (failOnDataLoss=false)", message)
