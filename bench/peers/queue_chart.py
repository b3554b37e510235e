"""Latency against the number of logic queues: the p50 and p99 of `trigger_phases` runs made with
different `--queues`, one line per system (staticmq one logic queue per Spark partition, Kafka one
partition per topic partition).

    for q in 2 8 16; do python -m bench.peers.trigger_phases --systems staticmq,kafka --queues $q \\
        --json q$q.json; done
    python -m bench.peers.queue_chart q2.json q8.json q16.json [latency-vs-queues.png]

Prints a table (each point: the median over the runs of one file) and draws the chart when
matplotlib is installed (the `dev` extra).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.common.report import log
from bench.peers.chart import pyplot, save

STYLES = {"staticmq": "#1f77b4", "staticmq-with-messages": "#9467bd", "staticmq-driver-read": "#17becf",
          "kafka": "#7f7f7f"}  # fmt: skip


def points(files: list[dict[str, Any]]) -> dict[str, dict[int, tuple[float, float]]]:
    """{system: {queues: (median p50, median p99)}} over the runs of every file with that system
    and number of queues (a system measured in two files at one size: the median of all its runs)."""
    runs: dict[str, dict[int, list[dict[str, float]]]] = {}
    for f in files:
        for system, measured in f["results"].items():
            runs.setdefault(system, {}).setdefault(int(f["queues"]), []).extend(measured)
    return {
        system: {
            q: (statistics.median(r["p50"] for r in rs), statistics.median(r["p99"] for r in rs))
            for q, rs in sorted(by_queues.items())
            if rs
        }
        for system, by_queues in runs.items()
    }


def table(by: dict[str, dict[int, tuple[float, float]]]) -> str:
    queues = sorted({q for v in by.values() for q in v})
    lines = [f"{'system':<36}" + "".join(f"{f'{q} queues p50 / p99':>24}" for q in queues)]
    for system, v in by.items():
        cells = [f"{v[q][0]:.0f} / {v[q][1]:.0f} ms" if q in v else "-" for q in queues]
        lines.append(f"{system:<36}" + "".join(f"{c:>24}" for c in cells))
    kafka = by.get("kafka", {})
    for system, v in by.items():
        if system != "kafka" and kafka:
            ratios = [f"{v[q][0] / kafka[q][0]:.2f}x" if q in v and q in kafka else "-" for q in queues]
            lines.append(f"{system + ' p50 / kafka':<36}" + "".join(f"{c:>24}" for c in ratios))
    return "\n".join(lines)


def draw(by: dict[str, dict[int, tuple[float, float]]], path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for system, v in by.items():
        qs = sorted(v)
        color = STYLES.get(system)
        ax.plot(qs, [v[q][0] for q in qs], marker="o", color=color, label=f"{system} p50")
        ax.plot(qs, [v[q][1] for q in qs], marker="x", linestyle="--", color=color, label=f"{system} p99")
    ax.set_xlabel("logic queues / partitions")
    ax.set_ylabel("latency, ms (0-second trigger)")
    ax.set_xticks(sorted({q for v in by.values() for q in v}))
    ax.set_title("trigger_phases: latency against the number of queues", fontsize=9)
    ax.legend(fontsize=7)
    save(plt, fig, path)
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    files = [a for a in args if a.endswith(".json")]
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    target = next((Path(a) for a in args if a.endswith(".png")), Path("latency-vs-queues.png"))
    by = points([json.loads(Path(f).read_text()) for f in files])
    print(table(by))
    if draw(by, target):
        log(f"chart: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
