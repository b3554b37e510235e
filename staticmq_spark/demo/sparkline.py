"""The demo's produced-vs-landed picture: rows per second of the run as two text sparklines on one
scale, so a reader sees at a glance whether the pipeline keeps up with the producer."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime

BARS = " ▁▂▃▄▅▆▇█"
WIDTH = 60  # columns at most; a longer run puts several seconds in a column


def per_second(events: Iterable[tuple[float, int]], start: float, seconds: int) -> list[int]:
    """Rows per second from `start` (epoch seconds) for `seconds` seconds: each (time, rows) event in
    the second it happened (earlier ones in the first, later ones in the last)."""
    counts = [0] * max(1, seconds)
    for at, rows in events:
        counts[min(len(counts) - 1, max(0, int(at - start)))] += rows
    return counts


def landed_events(progress: Iterable[dict]) -> list[tuple[float, int]]:  # type: ignore[type-arg]
    """(end of the micro-batch in epoch seconds, rows) of each StreamingQueryProgress with rows."""
    out = []
    for p in progress:
        if p.get("numInputRows"):
            started = datetime.fromisoformat(str(p["timestamp"]).replace("Z", "+00:00")).timestamp()
            out.append((started + p["durationMs"].get("triggerExecution", 0) / 1000, int(p["numInputRows"])))
    return out


def columns(values: Sequence[int], width: int = WIDTH) -> tuple[list[int], int]:
    """`values` summed `step` at a time so that at most `width` columns remain; (columns, step)."""
    step = max(1, math.ceil(len(values) / width))
    return [sum(values[i : i + step]) for i in range(0, len(values), step)], step


def sparkline(values: Sequence[int], top: int) -> str:
    """One character per value, its height value / top (blank for 0, the lowest bar for any row)."""
    if top <= 0:
        return BARS[0] * len(values)
    levels = len(BARS) - 1
    return "".join(BARS[0] if v <= 0 else BARS[max(1, min(levels, round(v / top * levels)))] for v in values)


def report_lines(produced: Sequence[int], landed: Sequence[int]) -> list[str]:
    """The two lines of the report, on one scale: produced and landed (bronze) rows per second."""
    p, step = columns(produced)
    landed_cols = [sum(landed[i : i + step]) for i in range(0, len(landed), step)]
    top = max([*p, *landed_cols, 0])
    unit = "second" if step == 1 else f"{step} seconds"
    return [
        f"per {unit} (one scale, peak {top:,} rows):",
        f"  produced |{sparkline(p, top)}|",
        f"  landed   |{sparkline(landed_cols, top)}|",
    ]
