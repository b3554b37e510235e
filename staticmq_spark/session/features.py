"""What the running pyspark offers the connector, found by feature (an import), never by version.

staticmq runs on every pyspark from 4.0.0 to 4.3. Two things it uses are newer than 4.0:

- **Admission control for Python sources** (`pyspark.sql.streaming.datasource`: `ReadLimit`,
  `SupportsTriggerAvailableNow`; pyspark 4.2). Where it exists, pyspark's runner asks the reader
  `latestOffset(start, limit)`, `getDefaultReadLimit()`, `reportLatestOffset()` and calls
  `prepareForTriggerAvailableNow()`. Where it does not (4.0, 4.1), the runner asks only
  `latestOffset()`: the reader then knows its own start (the end of the last micro-batch it
  planned, or its initial offset) and applies its per-trigger limits from its options
  (`source.stream_reader`), from a run's second micro-batch on. `Trigger.AvailableNow` there is
  Spark's single-batch fallback, and the runner calls a Python source the same way whatever the
  trigger, so the first micro-batch of each run (a start or a restart) reads everything available:
  AvailableNow never stops with messages left behind. Spark shows no lag in the query progress.
- **The Arrow stream writer** (`DataSourceStreamArrowWriter`; pyspark 4.1). Where it is missing,
  the stream writer is also a `DataSourceArrowWriter`, which pyspark 4.0's write function checks
  first whatever the write is: rows reach the sink as Arrow batches on every version.

Where a feature is missing, this module gives stand-ins with the same names and fields, so the
source and sink are written once against them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter

__all__ = [
    "ADMISSION_CONTROL",
    "AVAILABLE_NOW_SPLITS",
    "STREAM_ARROW_WRITER",
    "ReadAllAvailable",
    "ReadLimit",
    "ReadMaxBytes",
    "ReadMaxRows",
    "ReadMinRows",
    "StreamArrowWriter",
    "SupportsTriggerAvailableNow",
    "missing_features",
    "register_data_source",
]


class _ReadLimit:
    """Stand-in of pyspark 4.2's ReadLimit: how much one micro-batch may read."""


@dataclass
class _ReadAllAvailable(_ReadLimit):
    pass


@dataclass
class _ReadMinRows(_ReadLimit):
    min_rows: int


@dataclass
class _ReadMaxRows(_ReadLimit):
    max_rows: int


@dataclass
class _ReadMaxBytes(_ReadLimit):
    max_bytes: int


class _SupportsTriggerAvailableNow(ABC):
    """Stand-in of pyspark 4.2's mixin (nothing calls it where the runner lacks it)."""

    @abstractmethod
    def prepareForTriggerAvailableNow(self) -> None: ...


class _StreamArrowWriter(DataSourceStreamWriter, DataSourceArrowWriter):  # type: ignore[misc]
    """A stream writer that pyspark 4.0's write function hands Arrow batches to (it checks for
    DataSourceArrowWriter before any other kind, streaming or not)."""


limits: Any
try:
    from pyspark.sql.streaming import datasource as limits

    ADMISSION_CONTROL = True
except ImportError:  # pyspark < 4.2
    limits = None
    ADMISSION_CONTROL = False

ReadLimit: Any = limits.ReadLimit if limits else _ReadLimit
ReadAllAvailable: Any = limits.ReadAllAvailable if limits else _ReadAllAvailable
ReadMinRows: Any = limits.ReadMinRows if limits else _ReadMinRows
ReadMaxRows: Any = limits.ReadMaxRows if limits else _ReadMaxRows
ReadMaxBytes: Any = limits.ReadMaxBytes if limits else _ReadMaxBytes
SupportsTriggerAvailableNow: Any = limits.SupportsTriggerAvailableNow if limits else _SupportsTriggerAvailableNow

# Whether Trigger.AvailableNow splits what is available into micro-batches of the per-trigger
# limits (with admission control), or reads it in one micro-batch (Spark's single-batch fallback).
AVAILABLE_NOW_SPLITS = ADMISSION_CONTROL

try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    StreamArrowWriter: Any = DataSourceStreamArrowWriter
    STREAM_ARROW_WRITER = True
except ImportError:  # pyspark < 4.1
    StreamArrowWriter = _StreamArrowWriter
    STREAM_ARROW_WRITER = False


def missing_features() -> list[str]:
    """What the running pyspark lacks, as a user reads it (`staticmq doctor`, the docs' table)."""
    missing = []
    if not ADMISSION_CONTROL:
        missing.append(
            "admission control for Python sources (pyspark 4.2): Trigger.AvailableNow reads everything "
            "available in one micro-batch (turn on spark.sql.streaming.triggerAvailableNowWrapper.enabled, "
            "configure_spark does), so does the first micro-batch of every run, the per-trigger limits "
            "apply from a run's second micro-batch on, and the query progress shows no lag"
        )
    if not STREAM_ARROW_WRITER:
        missing.append(
            "the Arrow stream writer (pyspark 4.1): the streaming sink gets the same Arrow batches "
            "as a batch Arrow writer (no row is converted)"
        )
    return missing


def register_data_source(session: Any, data_source: Any) -> None:
    """`session.dataSource.register(data_source)` (classic or Spark Connect). Spark 4.0 and 4.1
    refuse to replace a data source their own lookup registered from an installed `pyspark_*`
    module (DATA_SOURCE_ALREADY_EXISTS; 4.2 and later replace it): there that one, the same data
    source, stays."""
    try:
        session.dataSource.register(data_source)
    except Exception as exc:
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
