"""A warning when the exactly-once sink's halves waited longer than a broker's transactionTimeOut.

RocketMQ's transaction check copies every half older than transactionTimeOut that has no op message
yet back into the half queue, then each copy again at every check, up to transactionCheckMax times.
Nothing is lost or duplicated for readers (the commit ends the original half), but each such row is
written up to transactionCheckMax + 1 times into the broker's commit log. The sink's halves wait
for the driver's commit, so a broker left at RocketMQ's default (6 s) pays that on every micro-batch
longer than 6 s. The driver reads each broker's timeout once and warns once per broker."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from staticmq_spark.backends.rocketmq.sinks.decisions import HalfRun
from staticmq_spark.backends.rocketmq.wire.remoting import RemotingClient
from staticmq_spark.errors import StaticMQError

log = logging.getLogger(__name__)
KEY = "transactionTimeOut"


class TimeoutWatch:
    """Each broker's transactionTimeOut (read once), and the brokers already warned about."""

    def __init__(self, client: RemotingClient) -> None:
        self.client = client
        self._timeouts: dict[str, int | None] = {}  # bname -> ms (None: not readable, e.g. no permission)
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def timeout_ms(self, bname: str, addr: str) -> int | None:
        with self._lock:
            if bname in self._timeouts:
                return self._timeouts[bname]
        try:
            value: int | None = int(self.client.broker_config(addr)[KEY])
        except (StaticMQError, KeyError, ValueError) as e:
            log.debug("cannot read %s of broker %s at %s: %s", KEY, bname, addr, e)
            value = None
        with self._lock:
            self._timeouts[bname] = value
        return value

    def check(self, batch: int, runs: Sequence[HalfRun], masters: dict[str, str]) -> None:
        """After micro-batch `batch` is committed: warn about each broker whose halves waited longer
        than its transactionTimeOut (clocks of executors and driver are assumed close)."""
        now = int(time.time() * 1000)
        oldest: dict[str, int] = {}
        for run in runs:
            if run.sent_ms:
                oldest[run.bname] = min(oldest.get(run.bname, run.sent_ms), run.sent_ms)
        for bname, sent in sorted(oldest.items()):
            addr = masters.get(bname)
            if bname in self._warned or addr is None:
                continue
            timeout = self.timeout_ms(bname, addr)
            if timeout is None or now - sent <= timeout:
                continue
            with self._lock:
                if bname in self._warned:
                    continue
                self._warned.add(bname)
            log.warning(
                "micro-batch %d: its half messages on broker %s waited %.1f s for the commit, longer than that "
                "broker's %s (%d ms). RocketMQ's transaction check copies each such half into its commit log "
                "again, up to transactionCheckMax + 1 times. Set %s on the brokers above your longest "
                "micro-batch (docs/rocketmq.md); this is reported once per broker",
                batch,
                bname,
                (now - sent) / 1000,
                KEY,
                timeout,
                KEY,
            )
