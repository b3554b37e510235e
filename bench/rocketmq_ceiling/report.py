"""`bench.rocketmq_ceiling`'s table: each system's median rows/s and CPU per million rows, java-plain and
java-transactional as the best of their configurations in each round, the ratios paired round by round."""

from __future__ import annotations

import statistics
from typing import Any

from bench.common.report import paired_ratios, ratio_text, summary

MAX_BATCH_BYTES = 3 << 20  # java-plain's batches: RocketMQ refuses a message (a batch is one) over 4 MiB
FIGURE = "sink"
RATIOS = [  # (numerator, denominator) over the medians' systems
    ("java-plain", "kafka-sink"),
    ("java-transactional", "kafka-sink"),
    ("staticmq-EO", "kafka-sink"),
    ("staticmq-ALO", "kafka-sink"),
    ("staticmq-EO", "java-transactional"),
    ("staticmq-ALO", "java-plain"),
]


def add_best(records: list[dict[str, Any]], size: int, run: int) -> None:
    """java-plain and java-transactional of one round and size: the fastest of their configurations."""
    for name, prefix in (("java-plain", "java-plain-"), ("java-transactional", "java-txn-")):
        mine = [r for r in records if r["run"] == run and r["value_bytes"] == size and r["system"].startswith(prefix)]
        if mine:
            best = max(mine, key=lambda r: r["value"])
            records.append({**best, "system": name, "best_of": best["system"]})


def table(records: list[dict[str, Any]], sizes: list[int], systems: list[str]) -> str:
    merged = {(r["system"], r["value_bytes"]): r for r in summary(records)}
    server: dict[tuple[str, int], float] = {}
    for key in merged:
        runs = [r["server_cpu_s_per_m_rows"] for r in records if (r["system"], r["value_bytes"]) == key]
        server[key] = statistics.median(runs)
    head = f"{'system':<22}{'rows':>9}" + "".join(f"{f'{s} B: rows/s':>17}{'CPU-s/M':>9}{'server':>8}" for s in sizes)
    lines = [head, "-" * len(head)]
    for system in systems:
        any_size = next((merged[(system, s)] for s in sizes if (system, s) in merged), None)
        if any_size is None:
            continue
        cells = "".join(
            f"{merged[(system, s)]['value']:>17,.0f}{merged[(system, s)]['cpu_s_per_m_rows']:>9,.0f}"
            f"{server[(system, s)]:>8,.0f}"
            if (system, s) in merged
            else f"{'':>34}"
            for s in sizes
        )
        lines.append(f"{system:<22}{any_size['rows']:>9,}" + cells)
    lines += ["", f"{'ratio (paired by round)':<40}" + "".join(f"{f'{s} B':>22}" for s in sizes), "-" * 84]
    for num, den in RATIOS:
        cells = "".join(f"{ratio_text(paired_ratios(records, FIGURE, f'{s} B', num, den)):>22}" for s in sizes)
        lines.append(f"{num + ' / ' + den:<40}" + cells)
    best = {r["system"]: r["best_of"] for r in records if "best_of" in r}
    lines.append(
        "medians of the rounds; CPU-s/M: CPU-seconds per million rows of every process of the system, server: the"
        " RocketMQ broker + name server (Kafka's JVM for kafka-sink) alone; java-plain / java-transactional: the"
        f" fastest configuration of each round (the last: {best.get('java-plain')}, {best.get('java-transactional')});"
        f" java-plain's batches are cut at {MAX_BATCH_BYTES >> 20} MiB"
    )
    return "\n".join(lines)
