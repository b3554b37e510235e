"""`bench.peers`' table: the medians per figure and system (`bench.common.report`), the ratios staticmq /
Kafka paired run by run (median and min-max)."""

from __future__ import annotations

from typing import Any

from bench.common.report import paired_ratios, ratio_text, summary

SYSTEMS = ("staticmq", "staticmq-on-rocketmq", "kafka", "rocketmq")


def table(records: list[dict[str, Any]]) -> str:
    """One line per figure and case: the median of each system, then staticmq / Kafka paired by run
    (median and min-max) and, when measured, staticmq-on-rocketmq / staticmq."""
    merged = summary(records)
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in merged)]
    keys: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in merged:
        keys.setdefault((r["figure"], r["case"]), {})[r["system"]] = r
    head = f"{'figure':<12} {'case':<44}" + "".join(f"{s:>22}" for s in systems)
    head += f"{'staticmq/kafka':>22}{'on-rocketmq/staticmq':>22}"
    lines = [head, "-" * len(head)]
    for (figure, case), by in keys.items():
        cells = []
        for s in systems:
            cell = by.get(s)
            if cell is None:
                cells.append(f"{'':>22}")
            elif cell["unit"] == "ms":
                cells.append(f"{cell['value']:>19,.1f} ms")
            elif "cpu_s_per_m_rows" in cell:
                cells.append(f"{cell['value']:>9,.0f} /s {cell['cpu_s_per_m_rows']:>5.1f} cpu")
            else:
                cells.append(f"{cell['value']:>9,.0f} /s {'-':>9}")
        vs_kafka = ratio_text(paired_ratios(records, figure, case, "staticmq", "kafka"))
        on_rmq = ratio_text(paired_ratios(records, figure, case, "staticmq-on-rocketmq", "staticmq"))
        lines.append(f"{figure:<12} {case:<44}" + "".join(cells) + f"{vs_kafka:>22}{on_rmq:>22}")
    lines.append(
        "medians of the runs; rows/s and CPU-seconds per million rows (all processes of the system + client);"
        " ratios paired run by run: median (min-max); latency: lower is better"
    )
    return "\n".join(lines)
