"""The global epoch check: do all brokers' copies describe one complete, consistent static topic?

Before any create, update or remap the admin gathers every live broker's copy and refuses to go
on when: copies disagree on epoch or totalQueues; a broker of the cluster holds no copy; a logic
queue has no leader, or its leader's broker is not alive, or does not hold the complete item
list (leader completeness); two copies claim different chains for the same leader gen; a leader
is undecided (a remap that did not finish); or a segment lives on a broker that is not alive.
The best chain per logic queue (newest leader gen) is what repair completes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from staticmq_spark.mapping.items import Chain, TopicQueueMapping


@dataclass
class ConsistencyReport:
    topic: str
    epoch: int = 0
    total_queues: int = 0
    chains: dict[int, Chain] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    undecided: list[int] = field(default_factory=list)
    exists: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        return "; ".join(self.problems)


def check_consistency(
    topic: str, copies: Mapping[str, TopicQueueMapping | None], live: Iterable[str] | None = None
) -> ConsistencyReport:
    """`copies`: every broker that should hold a copy -> its copy (None when it holds none);
    `live`: every live broker (default: the keys of `copies`), for the alive checks."""
    report = ConsistencyReport(topic)
    alive = set(copies) | set(live or ())
    present = {b: m for b, m in copies.items() if m is not None}
    if not present:
        report.exists = False
        return report
    epochs = {m.epoch for m in present.values()}
    totals = {m.total_queues for m in present.values()}
    report.epoch = max(epochs)
    report.total_queues = max(totals)
    if len(epochs) > 1:
        report.problems.append("epochs differ: " + ", ".join(f"{b}={m.epoch}" for b, m in sorted(present.items())))
    if len(totals) > 1:
        report.problems.append(
            "totalQueues differ: " + ", ".join(f"{b}={m.total_queues}" for b, m in sorted(present.items()))
        )
    lacking = sorted(b for b, m in copies.items() if m is None)
    if lacking:
        report.problems.append(f"broker(s) {lacking} hold no copy of the mapping")
    for q in range(report.total_queues):
        _check_queue(report, q, present, alive)
    return report


def _check_queue(
    report: ConsistencyReport,
    q: int,
    present: Mapping[str, TopicQueueMapping],
    live: set[str],
) -> None:
    candidates = [(b, m.hosted[q]) for b, m in sorted(present.items()) if m.hosted.get(q)]
    if not candidates:
        report.problems.append(f"logic queue {q}: no live broker hosts it (its broker may be down)")
        return
    newest_gen = max(chain[-1].gen for _, chain in candidates)
    newest = {chain for _, chain in candidates if chain[-1].gen == newest_gen}
    best = max(newest, key=_progress)
    if not all(_compatible(c, best) for c in newest):
        report.problems.append(f"logic queue {q}: brokers hold conflicting item lists for gen {newest_gen}")
    lead = best[-1].bname
    if lead not in live:
        report.problems.append(f"logic queue {q}: its leader broker {lead!r} is not alive")
    elif present.get(lead) is None or present[lead].hosted.get(q) != best:
        report.problems.append(
            f"logic queue {q}: leader broker {lead!r} does not hold the complete item list (leader completeness)"
        )
    if not best[-1].decided:
        report.undecided.append(q)
        report.problems.append(f"logic queue {q}: the leader's logicOffset is undecided (a remap did not finish)")
    gone = sorted({i.bname for i in best[:-1] if i.bname not in live})
    if gone:
        report.problems.append(f"logic queue {q}: segments on broker(s) {gone}, which are not alive")
    report.chains[q] = best


def _progress(chain: Chain) -> tuple[bool, int, int]:
    """How far an operation got in this copy: leader decided, ends set, items kept."""
    return (chain[-1].decided, sum(1 for i in chain if i.end_offset >= 0), len(chain))


def _compatible(a: Chain, b: Chain) -> bool:
    """Same segments, where one copy may lag the other (undecided offsets, unset ends, items
    not yet cleaned up)."""
    by_gen = {i.gen: i for i in b}
    for item in a:
        other = by_gen.get(item.gen)
        if other is None:
            if item.gen >= b[0].gen:
                return False
            continue
        if (item.bname, item.queue, item.start_offset) != (other.bname, other.queue, other.start_offset):
            return False
        if item.decided and other.decided and item.logic_offset != other.logic_offset:
            return False
        if item.end_offset >= 0 and other.end_offset >= 0 and item.end_offset != other.end_offset:
            return False
    return True
