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


@dataclass
class LakeContents:
    """What the pipeline left in Delta: row counts, versions, and gold's views per user."""

    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    distinct_bronze_messages: int = 0
    gold_views: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def read(spark: Any, lake: Any) -> LakeContents:
        from staticmq_spark.lakehouse import table_version

        out = LakeContents()
        for name in ("bronze", "silver", "gold"):
            df = spark.read.format("delta").load(lake.table(name))
            out.tables[name] = {"rows": df.count(), "version": table_version(spark, lake.table(name))}
        bronze = spark.read.format("delta").load(lake.table("bronze"))
        out.distinct_bronze_messages = bronze.select("queueId", "queueOffset").distinct().count()
        gold = spark.read.format("delta").load(lake.table("gold")).select("user", "views").collect()
        out.gold_views = {r["user"]: int(r["views"]) for r in gold}
        return out

    def summary(self) -> dict[str, dict[str, int]]:
        return self.tables


def verify_lake(sent: Counter[str], lake: LakeContents) -> list[Check]:
    total = sum(sent.values())
    bronze = lake.tables.get("bronze", {}).get("rows", -1)
    silver = lake.tables.get("silver", {}).get("rows", -1)
    wrong = {u: (lake.gold_views.get(u, 0), n) for u, n in sent.items() if lake.gold_views.get(u, 0) != n}
    return [
        Check(
            "delta bronze holds every message once",
            bronze == total and lake.distinct_bronze_messages == total,
            f"{bronze} rows, {lake.distinct_bronze_messages} distinct (queueId, queueOffset), {total} sent",
        ),
        Check("delta silver has one row per page view", silver == total, f"{silver} rows, {total} sent"),
        Check(
            "delta gold totals match what was sent",
            not wrong and len(lake.gold_views) == len(sent),
            f"{len(lake.gold_views)} users, views add up to {sum(lake.gold_views.values())} of {total}"
            + (f"; wrong for {len(wrong)} users, e.g. {dict(list(wrong.items())[:3])} (got, sent)" if wrong else ""),
        ),
    ]


def check_refuses_unsigned(cluster: Any) -> Check:
    """On a secure cluster: a request without credentials is refused, and the pipeline's own account
    may not delete the topic it writes (admin only)."""
    from staticmq_spark.client.admin import Admin
    from staticmq_spark.errors import AccessDeniedError, UnauthenticatedError

    tls = {k: v for k, v in cluster.client_options.items() if k == "tls_ca"}
    outcomes = []
    try:
        with Admin(cluster.namesrv, wait_for_ready=False, **tls) as anonymous:
            anonymous.cluster_info()
        outcomes.append("an unsigned request was ANSWERED")
    except UnauthenticatedError:
        outcomes.append("unsigned request refused (UNAUTHENTICATED)")
    try:
        with Admin(cluster.namesrv, wait_for_ready=False, **cluster.client_options) as pipeline:
            pipeline.delete_topic(cluster.input_topic)
        outcomes.append("the pipeline account DELETED the input topic")
    except AccessDeniedError as exc:
        refused = not isinstance(exc, UnauthenticatedError)
        outcomes.append("pipeline account may not delete topics (PERMISSION_DENIED)" if refused else str(exc))
    ok = all("refused" in o or "may not" in o for o in outcomes)
    return Check("ACL and TLS: every call signed, permissions enforced", ok, "; ".join(outcomes))
