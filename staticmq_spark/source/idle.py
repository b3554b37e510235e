"""Backing off while a streaming query finds nothing new.

With the default trigger Spark asks the source for its latest offset about every 10 ms
(`spark.sql.streaming.pollingDelay`) while no data arrives, and each answer costs a round of
requests to the brokers: an idle query used to keep ~45% of a core busy. The stream reader waits
a little before answering "nothing new", doubling the wait on every empty poll up to `max_s`, and
starts over as soon as a poll finds data. A message that arrives while the query is idle is thus
seen at most `max_s` later; a busy query never waits.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_WAIT_S = 0.01
MAX_WAIT_S = 0.25


@dataclass
class IdleBackoff:
    first_s: float = FIRST_WAIT_S
    max_s: float = MAX_WAIT_S
    _next_s: float = 0.0

    def after_poll(self, found_data: bool) -> float:
        """How long to wait before answering a poll that found data (0) or nothing (grows)."""
        if found_data:
            self._next_s = 0.0
            return 0.0
        self._next_s = min(self.max_s, self._next_s * 2 if self._next_s else self.first_s)
        return self._next_s
