"""A `sitecustomize` that rewrites `sys.path` on the Python workers Spark starts for staticmq's data
source, and `register`, which puts this directory on those workers' PYTHONPATH so that it runs.

Why: every streaming query starts a new Python process for its source (pyspark's
`python_streaming_source_runner`), and Spark puts `pyspark.zip` first on that process's path:
Python compiles pyspark's modules from the zip each time, about 1 CPU-second per query (3.2 s
against 2.2 s for 200,000 rows in one AvailableNow query on 2 cores,
docs/investigations/2026-11-26-query-start-cpu.md).
`register` registers the data source with this directory prepended to the PYTHONPATH Spark gives
its workers; the `sitecustomize` here then takes the zip off the path when the same pyspark is
installed, so that installation's cached bytecode is used (and changes nothing when the versions
differ or nothing is installed).
Only the registered data source's workers get it: other Python functions of the session keep the
environment they had.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

WORKER_SITE = os.path.dirname(os.path.abspath(__file__))


def worker_environment(environment: dict[str, str]) -> dict[str, str]:
    """`environment` (Spark's executor environment) with this directory first on PYTHONPATH."""
    given = environment.get("PYTHONPATH", "")
    entries = [WORKER_SITE, *(e for e in given.split(os.pathsep) if e and e != WORKER_SITE)]
    return {**environment, "PYTHONPATH": os.pathsep.join(entries)}


def register(session: Any, data_source: Any) -> None:
    """`session.dataSource.register(data_source)` (a pyspark `DataSource` class) with
    `worker_environment` for its workers.

    A data source pyspark registered already under the same name (an installed `pyspark_*`
    module) is replaced; Spark's warning about that replacement is not shown, as it is meant.
    Spark 4.0 and 4.1 refuse to replace such a one (DATA_SOURCE_ALREADY_EXISTS): there it stays as
    pyspark registered it, the same data source, its workers started without this directory."""
    from staticmq_spark.session.features import register_data_source

    context = session.sparkContext
    manager = session._jsparkSession.sessionState().dataSourceManager()
    with _quiet(context._jvm, manager.getClass().getName()):
        manager.dataSourceExists(data_source.name())  # loads pyspark's lookup now, while quiet
        saved = context.environment
        context.environment = worker_environment(dict(saved))
        try:
            register_data_source(session, data_source)
        finally:
            context.environment = saved


@contextmanager
def _quiet(jvm: Any, logger: str) -> Iterator[None]:
    """Only errors of the JVM logger `logger` are logged inside; its own level comes back after
    (or, if it had none, what it inherits)."""
    log4j = jvm.org.apache.logging.log4j
    configured = log4j.LogManager.getContext(False).getConfiguration().getLoggerConfig(logger)
    before = configured.getLevel() if configured.getName() == logger else None
    log4j.core.config.Configurator.setLevel(logger, log4j.Level.ERROR)
    try:
        yield
    finally:
        log4j.core.config.Configurator.setLevel(logger, before)
