"""Queue selection for keyless sends: a pipeline of filters with a fallback (RIP-63).

    stage 1: queues that are *available* (their broker's circuit breaker is closed) and
             *reachable* (the active detector saw the broker alive)
    stage 2: queues that are reachable
    stage 3: every queue, in turn

The first non-empty stage gives the preferred queues (rotated round-robin); every other queue
follows them, so a send is never left without a queue to try. Placeholder logic queues (their
broker is down) are never chosen for keyless sends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from staticmq_spark.backends.staticmq.rpc import Channels, invoke
from staticmq_spark.errors import StaticMQError
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.topics.route_view import QueueAddress

log = logging.getLogger(__name__)


class QueueFilter(Protocol):
    def accepts(self, queue: QueueAddress) -> bool: ...


@dataclass
class _BreakerState:
    failures: int = 0
    open_until: float = 0.0


class CircuitBreaker:
    """Per-broker availability: each send failure opens the breaker for a back-off that doubles
    with consecutive failures (base_s, 2*base_s, ... up to max_s); a success closes it."""

    def __init__(self, base_s: float = 1.0, max_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._base_s = base_s
        self._max_s = max_s
        self._clock = clock
        self._lock = threading.Lock()
        self._states: dict[str, _BreakerState] = {}

    def record_failure(self, broker: str) -> None:
        with self._lock:
            st = self._states.setdefault(broker, _BreakerState())
            st.failures += 1
            st.open_until = self._clock() + min(self._max_s, self._base_s * 2 ** (st.failures - 1))

    def record_success(self, broker: str) -> None:
        with self._lock:
            self._states.pop(broker, None)

    def available(self, broker: str) -> bool:
        st = self._states.get(broker)
        return st is None or self._clock() >= st.open_until

    def accepts(self, queue: QueueAddress) -> bool:
        return self.available(queue.broker)


class ReachabilityDetector:
    """Active detection: probes the brokers it watches with Ping over the shared long-lived
    channels every `interval_s`; a broker that does not answer within `timeout_s` is unreachable
    until a later probe succeeds. When disabled every broker counts as reachable."""

    def __init__(
        self, channels: Channels, *, enabled: bool = True, interval_s: float = 2.0, timeout_s: float = 1.0
    ) -> None:
        self.enabled = enabled
        self._channels = channels
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._watched: dict[str, str] = {}
        self._unreachable: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, brokers: dict[str, str]) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._watched.update(brokers)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="staticmq-detector", daemon=True)
                self._thread.start()

    def reachable(self, broker: str) -> bool:
        return not self.enabled or broker not in self._unreachable

    def accepts(self, queue: QueueAddress) -> bool:
        return self.reachable(queue.broker)

    def probe_once(self) -> None:
        with self._lock:
            watched = dict(self._watched)
        for name, addr in watched.items():
            try:
                invoke(addr, self._channels.broker(addr).Ping, pb.Empty(), self._timeout_s, wait_for_ready=False)
                if name in self._unreachable:
                    log.info("broker %s is reachable again", name)
                self._unreachable.discard(name)
            except StaticMQError:
                if name not in self._unreachable:
                    log.warning("broker %s (%s) did not answer a probe", name, addr)
                self._unreachable.add(name)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self.probe_once()

    def stop(self) -> None:
        self._stop.set()


class QueueSelector:
    def __init__(self, filters: Sequence[QueueFilter]) -> None:
        self._filters = list(filters)
        self._counter = 0
        self._lock = threading.Lock()

    def order(self, queues: Sequence[QueueAddress]) -> list[QueueAddress]:
        """Every usable queue, preferred ones first, rotated so successive sends spread out."""
        usable = [q for q in queues if q.available]
        if not usable:
            return []
        with self._lock:
            start = self._counter
            self._counter += 1
        rotated = usable[start % len(usable) :] + usable[: start % len(usable)]
        for depth in range(len(self._filters)):
            stage = [q for q in rotated if all(f.accepts(q) for f in self._filters[depth:])]
            if stage:
                rest = [q for q in rotated if q not in stage]
                return stage + rest
        return rotated
