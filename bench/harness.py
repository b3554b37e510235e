"""Shared measuring code of the comparison benchmarks: timed runs and waiting for routes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from staticmq_spark.errors import TopicNotFoundError

Runner = Callable[[int], Callable[[], None]]  # setup(run index) -> the timed part


def measure(label: str, setup: Runner, messages: int, repeat: int, width: int = 44) -> list[float]:
    """`repeat` runs of `setup(i)()`, only the returned closure timed; msgs/s of each run."""
    rates = []
    for i in range(repeat):
        run = setup(i)
        t0 = time.perf_counter()
        run()
        rates.append(messages / (time.perf_counter() - t0))
        print(f"  {label:<{width}} run {i + 1}/{repeat}: {rates[-1]:>11,.0f} msgs/s", file=sys.stderr, flush=True)
    return rates


def wait_route(client: Any, topic: str) -> None:
    """Wait until the name server routes a new topic (`client` has a RouteCache as `.routes`)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            client.routes.get(topic, refresh=True)
            return
        except TopicNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
