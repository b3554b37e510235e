"""The demo report's produced-vs-landed sparklines."""

from __future__ import annotations

import pytest

from staticmq_spark.demo.runner import catch_up_seconds
from staticmq_spark.demo.sparkline import columns, landed_events, per_second, report_lines, sparkline


def test_rows_fall_in_the_second_they_happened() -> None:
    assert per_second([(100.2, 5), (101.9, 3), (101.0, 1), (99.0, 2), (107.0, 4)], 100.0, 3) == [7, 4, 4]


def test_landed_rows_are_dated_at_the_end_of_their_micro_batch() -> None:
    progress = [
        {"timestamp": "2026-11-26T12:00:00.000Z", "numInputRows": 10, "durationMs": {"triggerExecution": 1500}},
        {"timestamp": "2026-11-26T12:00:02.000Z", "numInputRows": 0, "durationMs": {"triggerExecution": 10}},
    ]
    [(at, rows)] = landed_events(progress)
    assert rows == 10 and at % 60 == 1.5


def test_bars_share_one_scale_and_long_runs_fold_into_columns() -> None:
    assert sparkline([0, 1, 4, 8], 8) == " ▁▄█"
    assert columns(list(range(10)), width=4) == ([3, 12, 21, 9], 3)
    lines = report_lines([8] * 3, [0, 0, 24])
    assert lines[0].startswith("per second") and "peak 24" in lines[0]
    assert lines[1] == "  produced |▃▃▃|" and lines[2] == "  landed   |  █|"
    assert report_lines([1] * 120, [1] * 120)[0].startswith("per 2 seconds")


def test_each_query_caught_up_at_the_end_of_its_last_batch_with_rows() -> None:
    landed = {
        "bronze": [(100.5, 500), (103.25, 700), (102.0, 300)],  # (end of a micro-batch, rows)
        "silver_gold": [(102.0, 800), (107.5, 700)],
        "results": [(108.0, 400)],
    }
    assert catch_up_seconds(100.0, landed) == [3.25, 7.5, 8.0]
    with pytest.raises(ValueError, match="streaming query results processed no rows"):
        catch_up_seconds(100.0, {"bronze": [(104.0, 1)], "results": []})
