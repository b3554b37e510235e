"""The producer side: the message bodies, waiting for the topic's route, and the Sender thread."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from bench.soak.clusters import Backend


def wait_route(backend: Backend, topic: str, timeout_s: float = 60.0) -> None:
    from staticmq_spark.errors import StaticMQError

    deadline = time.monotonic() + timeout_s
    with backend.producer() as producer:
        while True:
            try:
                if producer.topic_is_static(topic):
                    return
            except StaticMQError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no static route for {topic} after {timeout_s}s")
            time.sleep(0.2)


def body_of(g: int, keys: int) -> tuple[str, bytes]:
    key, seq = g % keys, g // keys
    return f"k{key}", f"k{key}:{seq}".encode()


@dataclass
class Sender:
    """Sends messages g = 0, 1, 2, ... (key g % keys, seq g // keys) in batches, one batch in
    flight, until `target` were acknowledged; `limit` holds it back (the fault schedule)."""

    backend: Backend
    topic: str
    target: int
    keys: int
    batch: int
    rate: float
    stall_s: float = 300.0
    limit: int = 0
    next_g: int = 0
    acked: int = 0
    acked_ranges: list[tuple[int, int]] = field(default_factory=list)
    unacked_ranges: list[tuple[int, int]] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    error_samples: dict[str, str] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None
    finished_at: float = 0.0

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:
            self.failure = e
        finally:
            self.finished_at = time.monotonic()
            self.done.set()

    def _run(self) -> None:
        started = time.monotonic()
        progress = started  # the last acknowledged send, or the end of a pause for the next fault
        with self.backend.producer() as producer:
            while self.acked < self.target:
                while self.acked >= self.limit:
                    time.sleep(0.05)  # pacing: the next fault has not happened yet (not a wait on the system)
                    progress = time.monotonic()
                if time.monotonic() - progress > self.stall_s:
                    raise RuntimeError(
                        f"the producer stalled: no send acknowledged for {self.stall_s:g} s "
                        f"({self.acked:,} acked); errors {self.errors}, e.g. {self.error_samples}"
                    )
                if self.rate > 0:
                    ahead = self.next_g / self.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                g0 = self.next_g
                n = min(self.batch, max(1, self.target - self.acked))
                rows = [body_of(g, self.keys) for g in range(g0, g0 + n)]
                self.next_g = g0 + n
                try:
                    producer.send_batch(self.topic, [b for _, b in rows], keys=[k for k, _ in rows])
                except Exception as e:
                    name = type(e).__name__
                    self.errors[name] = self.errors.get(name, 0) + 1
                    self.error_samples.setdefault(name, str(e)[:300])
                    self.unacked_ranges.append((g0, g0 + n))
                    time.sleep(0.2)  # pacing: no tight loop while a queue is unavailable
                else:
                    self.acked_ranges.append((g0, g0 + n))
                    self.acked += n
                    progress = time.monotonic()
