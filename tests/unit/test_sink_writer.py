"""The sink writer's task-side helpers."""

from __future__ import annotations

import gc

import pytest

from staticmq_spark.sink.writer import gc_paused


def test_garbage_collection_is_paused_while_a_task_stages_and_restored_after() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_garbage_collection_is_restored_when_staging_fails() -> None:
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("a broker refused the rows")
    assert gc.isenabled()


def test_a_collector_disabled_before_the_task_stays_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_long_lived_heap_is_frozen_once_per_worker_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from staticmq_spark.sink import writer

    # Count the freezes themselves: the frozen generation's size is no witness, since a frozen object
    # that dies leaves it (one did, in a CI run) and would read as a change either way.
    freezes: list[int] = []
    real_freeze = gc.freeze

    def counting_freeze() -> None:
        freezes.append(1)
        real_freeze()

    frozen_before, was = gc.get_freeze_count(), writer._HEAP_FROZEN
    monkeypatch.setattr(gc, "freeze", counting_freeze)
    try:
        writer._HEAP_FROZEN = False
        writer.freeze_long_lived_heap()
        assert len(freezes) == 1
        assert gc.get_freeze_count() > frozen_before
        young = [[n] for n in range(10)]  # tracked containers allocated after the freeze
        writer.freeze_long_lived_heap()
        assert len(freezes) == 1, "the heap was frozen a second time"
        assert all(gc.is_tracked(y) for y in young)
    finally:
        gc.unfreeze()
        writer._HEAP_FROZEN = was
