"""The figures of `bench.peers` as a bar chart: one group per figure and case, one bar per system,
each bar its value over Kafka's (1.0 = Kafka; latency: lower is better), labelled with the ratio.

    python -m bench.peers.chart peers.json [peers.png]

`python -m bench.peers --json F` draws it next to F (F's name with .png). Needs matplotlib (the `dev`
extra); without it the chart is skipped with a message.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.common.report import log

COLORS = {"staticmq": "#1f77b4", "staticmq-on-rocketmq": "#2ca02c", "kafka": "#7f7f7f", "rocketmq": "#ff7f0e"}


def groups(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, float]]]:
    """(label, {system: value / Kafka's value}) per figure and case that Kafka measured, in run order."""
    by: dict[tuple[str, str], dict[str, float]] = {}
    for r in records:
        by.setdefault((r["figure"], r["case"]), {})[r["system"]] = r["value"]
    out = []
    for (figure, case), values in by.items():
        kafka = values.get("kafka")
        if kafka:
            label = f"{figure}\n{case}".replace(", availableNow", "").replace(", flush per ack", "")
            out.append(
                (
                    label,
                    {s: v / kafka for s, v in values.items() if s != "rocketmq" or figure in ("produce", "consume")},
                )
            )
    return out


def draw(records: list[dict[str, Any]], path: str | Path) -> bool:
    """Write the chart to `path`; False (and a message) when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    rows = groups(records)
    systems = [s for s in COLORS if any(s in v for _, v in rows)]
    width = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(rows)), 5.0))
    for k, system in enumerate(systems):
        xs = [i + (k - (len(systems) - 1) / 2) * width for i, (_, v) in enumerate(rows) if system in v]
        ys = [v[system] for _, v in rows if system in v]
        bars = ax.bar(xs, ys, width, label=system, color=COLORS[system])
        if system != "kafka":
            ax.bar_label(bars, labels=[f"{y:.2f}x" for y in ys], fontsize=6, rotation=90, padding=2)
    ax.axhline(1.0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(rows)), [label for label, _ in rows], fontsize=6, rotation=60, ha="right")
    ax.set_ylabel("value / Kafka's (latency: lower is better)", fontsize=8)
    ax.set_title("bench.peers: staticmq, staticmq on RocketMQ and RocketMQ next to Kafka", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    save(plt, fig, path)
    return True


def pyplot() -> Any | None:
    """matplotlib's pyplot drawing into files (the Agg backend), or None (and a message) when
    matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed (pip install -e '.[dev]'): no chart drawn")
        return None
    return plt


def save(plt: Any, fig: Any, path: str | Path) -> None:
    """Lay out, write (150 dpi) and close a figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    source = Path(args[0])
    target = Path(args[1]) if len(args) > 1 else source.with_suffix(".png")
    drawn = draw(json.loads(source.read_text()), target)
    if drawn:
        log(f"chart: {target}")
    return 0 if drawn else 1


if __name__ == "__main__":
    sys.exit(main())
