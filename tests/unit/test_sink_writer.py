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


def test_the_long_lived_heap_is_frozen_once_per_worker_process() -> None:
    from staticmq_spark.sink import writer

    frozen_before, was = gc.get_freeze_count(), writer._HEAP_FROZEN
    try:
        writer._HEAP_FROZEN = False
        writer.freeze_long_lived_heap()
        frozen = gc.get_freeze_count()
        assert frozen > frozen_before
        young = [[n] for n in range(10)]  # tracked containers allocated after the freeze
        writer.freeze_long_lived_heap()
        assert gc.get_freeze_count() == frozen, "the heap was frozen a second time"
        assert all(gc.is_tracked(y) for y in young)
    finally:
        gc.unfreeze()
        writer._HEAP_FROZEN = was
