"""The demo's verification: what came out must account for exactly what went in."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from staticmq_spark.hashing import queue_for_key


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    passed: bool
    detail: str


@dataclass
class OutputRows:
    """The sink topic read back: per user, (logic queue, logic offset, views) in offset order."""

    by_user: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)
    rows: int = 0

    @staticmethod
    def from_rows(rows: list[Any]) -> OutputRows:
        out = OutputRows()
        for r in rows:
            views = int(json.loads(bytes(r["value"]))["views"])
            out.by_user.setdefault(r["key"], []).append((r["queueId"], r["queueOffset"], views))
            out.rows += 1
        for entries in out.by_user.values():
            entries.sort(key=lambda e: e[1])
        return out


def verify(sent: Counter[str], output: OutputRows, total_queues: int) -> list[Check]:
    checks = []
    final = {user: entries[-1][2] for user, entries in output.by_user.items()}
    wrong = {u: (final.get(u, 0), n) for u, n in sent.items() if final.get(u, 0) != n}
    checks.append(
        Check(
            "nothing lost or duplicated",
            not wrong and sum(final.values()) == sum(sent.values()),
            f"final view counts of {len(sent)} users add up to {sum(final.values())} of {sum(sent.values())} sent"
            + (f"; wrong for {len(wrong)} users, e.g. {dict(list(wrong.items())[:3])} (got, sent)" if wrong else ""),
        )
    )
    misplaced = [
        u for u, entries in output.by_user.items() if {e[0] for e in entries} != {queue_for_key(u, total_queues)}
    ]
    checks.append(
        Check(
            "every key in exactly its hash queue",
            not misplaced,
            f"{len(output.by_user)} keys, each in logic queue murmur3(key) mod {total_queues}"
            + (f"; misplaced: {misplaced[:5]}" if misplaced else ""),
        )
    )
    repeated = [u for u, entries in output.by_user.items() if any(a[2] >= b[2] for a, b in itertools.pairwise(entries))]
    checks.append(
        Check(
            "no update written twice",
            not repeated,
            f"{output.rows} updates, each user's view count strictly increasing"
            + (f"; repeated for {repeated[:5]}" if repeated else ""),
        )
    )
    unknown = sorted(set(output.by_user) - set(sent))
    checks.append(Check("no unexpected keys", not unknown, f"{len(unknown)} keys not produced" if unknown else "none"))
    return checks
