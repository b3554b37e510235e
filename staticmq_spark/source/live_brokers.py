"""The live brokers a query's driver asks for its topics' state at every trigger.

A snapshot needs every live broker's state of a topic (`ClusterReader.gather`), and which brokers
are alive is the name server's answer: one more round trip per trigger, 1-2 ms of a 0-second
trigger's latestOffset, and a call on the name server per query per trigger. The list changes
rarely, so the driver keeps it for at most MAX_AGE_S and asks the brokers on it directly. A list
kept too long can only be short of a broker (one that registered since) or name one that is gone;
either shows in the answers, and then the name server is asked again at once (`doubtful`): an
asked broker did not answer, or the answers do not make one consistent topic (a logic queue
without a live leader among them, a chain whose leader is not on the list, brokers whose copies
disagree, as during a remap onto a new broker). Nothing read is ever planned from a doubtful
answer: the snapshot is then taken from the name server's list, as it is without this cache."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from staticmq_spark.backends import BrokerState, ClusterReader
from staticmq_spark.mapping import ConsistencyReport

MAX_AGE_S = 10.0


class LiveBrokers:
    """name -> address of the live brokers, as the name server last said, for at most `max_age_s`."""

    def __init__(self, max_age_s: float = MAX_AGE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s = max_age_s
        self._clock = clock
        self._brokers: dict[str, str] | None = None
        self._asked_at = 0.0

    def __getstate__(self) -> dict[str, Any]:
        """A copy in another process (a pickled reader) starts without a list: its clock differs."""
        return {**self.__dict__, "_brokers": None, "_asked_at": 0.0}

    def kept(self) -> dict[str, str] | None:
        """The list, while it is younger than `max_age_s`; None when it must be asked for."""
        if self._brokers is None or self._clock() - self._asked_at >= self.max_age_s:
            return None
        return self._brokers

    def ask(self, access: ClusterReader) -> dict[str, str]:
        """The name server's list now, kept from here on."""
        self._brokers = dict(access.live_brokers())
        self._asked_at = self._clock()
        return self._brokers


def doubtful(asked: Mapping[str, str], states: Mapping[str, BrokerState], report: ConsistencyReport) -> bool:
    """Whether answers gathered from a kept list (`report`: their consistency check) may be missing a
    broker: an asked broker did not answer, the copies disagree, a logic queue has no leader among
    the answers, or a leader is not on the list."""
    if set(states) != set(asked) or report.problems:
        return True
    leaders = {q: chain[-1].bname for q, chain in report.chains.items() if chain}
    if any(q not in leaders for q in range(report.total_queues)):
        return True
    return any(name not in asked for name in leaders.values())
