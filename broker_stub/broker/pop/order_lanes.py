"""Order pop: one lane per (group, topic, queue) that keeps a queue's messages in order.

While a lane has a CK with pending messages whose invisible time is not over, the queue hands out
nothing more (`blocked`). When the time is over, the next pop starts again at the lane's commit
offset - the first message not done - so redelivery keeps the order; messages already acked are
not handed out again (they are marked `done_before` in the new CK). Un-acked messages are
redelivered from the queue itself, never through the retry topic; a message delivered more than
the max reconsume count goes to the DLQ instead and counts as done.

Offsets are logic offsets (they may jump at a static topic's segment boundary): `attempts` lists,
in offset order, every offset covered by a CK since `commit`, with its number of deliveries.
Pure bookkeeping, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from broker_stub.broker.pop.checkpoints import CheckPoint

LaneKey = tuple[str, str, int]  # group, topic, queue_id


@dataclass(frozen=True, slots=True)
class LanePlan:
    """What to do with the messages read from the lane's commit offset on (first `count`)."""

    count: int  # messages the new CK covers
    done_before: npt.NDArray[np.uint8]  # per covered message: 1 = done already (or dead), not handed out
    attempts: npt.NDArray[np.int32]  # per covered message: deliveries including this one
    deliver: npt.NDArray[np.int64]  # positions handed out, in order
    dead: npt.NDArray[np.int64]  # positions past the max reconsume count: to the DLQ


@dataclass(eq=False, slots=True)
class OrderLane:
    gen: int  # the static leader generation it was built for (0 on plain topics)
    commit: int  # first offset not done
    read_to: int  # fresh reads continue here
    attempts: dict[int, int] = field(default_factory=dict)  # offset -> deliveries, offset order
    done: set[int] = field(default_factory=set)
    inflight: dict[int, CheckPoint] = field(default_factory=dict)

    def blocked(self, now_ms: int) -> bool:
        return any(ck.pending > 0 and ck.deadline > now_ms for ck in self.inflight.values())

    def plan(self, offsets: npt.NDArray[np.int64], max_deliver: int, max_reconsume: int) -> LanePlan:
        """Plan a delivery of the messages at `offsets` (read from `commit` on, in order)."""
        prior = np.array([self.attempts.get(o, 0) for o in offsets.tolist()], dtype=np.int32)
        done = np.array([o in self.done for o in offsets.tolist()], dtype=bool)
        dead = ~done & (prior > max_reconsume)
        live = ~done & ~dead
        cut = len(offsets)
        if int(live.sum()) > max_deliver:
            cut = int(np.flatnonzero(live)[max_deliver - 1]) + 1
        live, dead, done, prior = live[:cut], dead[:cut], done[:cut], prior[:cut]
        return LanePlan(
            count=cut,
            done_before=(done | dead).astype(np.uint8),
            attempts=np.where(live, prior + 1, prior).astype(np.int32),
            deliver=np.flatnonzero(live).astype(np.int64),
            dead=np.flatnonzero(dead).astype(np.int64),
        )

    def apply_ck(self, ck: CheckPoint) -> None:
        """Record a delivery (live, or replayed from the revive log)."""
        rec = ck.record
        offsets = ck.logic_offsets(np.arange(rec.count, dtype=np.int64)).tolist()
        attempts = np.frombuffer(rec.attempts, dtype="<i4").tolist() if rec.attempts else [1] * rec.count
        done = np.frombuffer(rec.done_before, dtype=np.uint8).tolist() if rec.done_before else [0] * rec.count
        for o, a, d in zip(offsets, attempts, done, strict=True):
            if o < self.commit:
                continue
            self.attempts[o] = max(self.attempts.get(o, 0), a)
            if d:
                self.done.add(o)
        if rec.next_begin >= 0:
            self.read_to = max(self.read_to, rec.next_begin)
        if ck.pending > 0:
            self.inflight[ck.ck_id] = ck
        self._advance()

    def mark_done(self, offsets: list[int]) -> bool:
        """Messages acked (or dead-lettered); returns whether the commit offset moved."""
        before = self.commit
        self.done.update(o for o in offsets if o >= self.commit)
        self._advance()
        return self.commit != before

    def drop_finished(self, now_ms: int) -> list[int]:
        """Forget CKs that are finished or expired (before a new delivery); returns those still
        in the table (expired with pending messages), which the caller retires."""
        expired = [ck.ck_id for ck in self.inflight.values() if ck.pending > 0 and ck.deadline <= now_ms]
        self.inflight.clear()
        return expired

    def _advance(self) -> None:
        while self.attempts:
            first = next(iter(self.attempts))
            if first not in self.done:
                break
            del self.attempts[first]
            self.done.discard(first)
        self.commit = next(iter(self.attempts)) if self.attempts else max(self.commit, self.read_to)

    # ------------------------------------------------------------------ checkpoint file

    def snapshot(self) -> dict[str, Any]:
        return {
            "gen": self.gen,
            "commit": self.commit,
            "read_to": self.read_to,
            "attempts": [[o, a] for o, a in self.attempts.items()],
            "done": sorted(self.done),
        }

    @staticmethod
    def restore(raw: dict[str, Any]) -> OrderLane:
        lane = OrderLane(int(raw["gen"]), int(raw["commit"]), int(raw["read_to"]))
        lane.attempts = {int(o): int(a) for o, a in raw.get("attempts", [])}
        lane.done = {int(o) for o in raw.get("done", [])}
        return lane
