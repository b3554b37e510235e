"""An idle streaming query backs off instead of polling the brokers every 10 ms."""

from __future__ import annotations

from staticmq_spark.source.idle import MAX_WAIT_S, IdleBackoff


def test_idle_polls_wait_longer_each_time_up_to_the_cap() -> None:
    backoff = IdleBackoff()
    waits = [backoff.after_poll(found_data=False) for _ in range(10)]
    assert waits[:4] == [0.01, 0.02, 0.04, 0.08]
    assert waits == sorted(waits) and waits[-1] == MAX_WAIT_S


def test_a_poll_that_finds_data_resets_the_backoff() -> None:
    backoff = IdleBackoff()
    for _ in range(6):
        backoff.after_poll(found_data=False)
    assert backoff.after_poll(found_data=True) == 0.0
    assert backoff.after_poll(found_data=False) == 0.01


def test_idle_query_polls_at_most_a_few_times_a_second_once_backed_off() -> None:
    backoff = IdleBackoff()
    waited, polls = 0.0, 0
    while waited < 10.0:  # ten seconds of an idle query, as the reader would wait them
        waited += backoff.after_poll(found_data=False) + 0.01  # + Spark's own 10 ms polling delay
        polls += 1
    assert polls <= 10 / MAX_WAIT_S + 10, f"{polls} polls in 10 s"
