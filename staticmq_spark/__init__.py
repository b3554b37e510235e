from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from staticmq_spark.session.activate import activate_in_thread
    from staticmq_spark.session.configure import configure_spark

__all__ = ["activate_in_thread", "configure_spark"]


def __getattr__(name: str) -> Any:
    """`configure_spark` and `activate_in_thread` are imported on first use: every process that
    imports any staticmq module (Spark's Python workers, pyspark's per-query planning process)
    would otherwise import the session helpers and their Maven machinery."""
    if name == "configure_spark":
        from staticmq_spark.session.configure import configure_spark

        return configure_spark
    if name == "activate_in_thread":
        from staticmq_spark.session.activate import activate_in_thread

        return activate_in_thread
    raise AttributeError(f"module 'staticmq_spark' has no attribute {name!r}")
