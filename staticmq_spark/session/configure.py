"""`configure_spark`: a SparkSession builder with staticmq registered and, on request, Delta Lake.

    from pyspark.sql import SparkSession
    from staticmq_spark import configure_spark

    spark = configure_spark(SparkSession.builder.master("local[2]"), delta=True).getOrCreate()

staticmq itself needs no jar: `format("staticmq")` is a Python data source, found through the
top-level `pyspark_staticmq` module of an installed staticmq and registered again here, by name,
when the session starts (so a session works even where that lookup is off, and its Python
workers start faster: see `workers/site`). Delta Lake needs its
JVM side: `delta=True` adds Delta's SQL extension and catalog and puts its jars on `spark.jars`.
The jars are the Delta build for the running Spark (4.0, 4.1 or 4.2); they come from Maven Central
once (through `mvn`, see `local_clusters/jvm_artifacts`) and are cached in
`~/.cache/staticmq/jars/delta-<version>-spark-<spark>`; a session starts without network afterwards.

Only `delta-spark` and `delta-storage` are added: everything else Delta depends on (Hadoop,
Jackson, Parquet, Scala) is Spark's own.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from staticmq_spark.errors import StaticMQError
from staticmq_spark.local_clusters.jvm_artifacts import fetch_artifacts
from staticmq_spark.session.connect import check_connect_builder, is_connect_session, register_over_connect

DELTA_VERSION = "4.4.0"
SCALA_BINARY = "2.13"
# Delta 4.4.0 is built once per Spark minor release, as `delta-spark_<spark>_<scala>`; it has
# none for Spark 4.3 yet.
DELTA_SPARK_BINARIES = ("4.0", "4.1", "4.2")
# Delta's transitive dependencies that Spark already ships (or that only Delta Kernel and Unity
# Catalog clients use): keeping them off spark.jars avoids two versions of one class.
DELTA_EXCLUDES = (
    "org.apache.hadoop:*",
    "com.fasterxml.jackson.core:*",
    "com.fasterxml.jackson.datatype:*",
    "org.apache.parquet:*",
    "org.scala-lang:*",
    "org.apache.logging.log4j:*",
    "org.slf4j:*",
    "io.delta:delta-kernel-api",
    "io.delta:delta-kernel-defaults",
    "io.delta:delta-kernel-unitycatalog",
    "io.unitycatalog:*",
    "org.roaringbitmap:*",
    "io.airlift:*",
    "commons-logging:*",
    "commons-pool:*",
    "javax.annotation:*",
    "com.google.code.findbugs:*",
    "org.locationtech.jts:*",
    "org.xerial.snappy:*",
    "com.github.luben:*",
)
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
# Spark's Trigger.AvailableNow for sources without native support (SPARK-45178): the source's
# latest offset when the query starts is where it ends, read after any uncommitted micro-batch.
AVAILABLE_NOW_WRAPPER = "spark.sql.streaming.triggerAvailableNowWrapper.enabled"
# The JVM talks to its Python workers over Unix domain sockets instead of TCP (pyspark 4.1 and
# later; 4.0 ignores the setting): no Nagle and delayed-ACK stalls on a task's socket.
UNIX_DOMAIN_SOCKETS = "spark.python.unix.domain.socket.enabled"


class NoDeltaForThisSpark(StaticMQError):
    """Delta Lake has no release for the running Spark."""

    code = "NO_DELTA_FOR_THIS_SPARK"


def running_spark_binary() -> str:
    """The running pyspark's `major.minor` (the Spark binary version Delta's artifacts name)."""
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def delta_package(spark_binary: str | None = None) -> str:
    """Delta Lake's Maven coordinate for a Spark binary version (default: the running pyspark's)."""
    binary = spark_binary or running_spark_binary()
    if binary not in DELTA_SPARK_BINARIES:
        raise NoDeltaForThisSpark(
            f"Delta Lake {DELTA_VERSION} has no release for Spark {binary} (it has one for Spark "
            f"{', '.join(DELTA_SPARK_BINARIES)}): run the Delta parts on one of those, or without delta=True"
        )
    return f"io.delta:delta-spark_{binary}_{SCALA_BINARY}:{DELTA_VERSION}"


def delta_jars(spark_binary: str | None = None) -> list[Path]:
    """Delta Lake's jars for this Spark, fetched once and cached (see the module docstring)."""
    package = delta_package(spark_binary)
    binary = package.split("_")[1]
    return fetch_artifacts(f"delta-{DELTA_VERSION}-spark-{binary}", (package,), excludes=DELTA_EXCLUDES)


def delta_conf() -> dict[str, str]:
    """The Spark settings that turn Delta Lake on (the same as `--jars`/`--conf` of spark-submit)."""
    return {
        "spark.jars": ",".join(str(jar) for jar in delta_jars()),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    }


def _register(session: Any) -> Any:
    """Registers `staticmq` with the environment of `workers/site` (its query runners import
    pyspark's cached bytecode instead of compiling `pyspark.zip`: about 1 CPU-second less per
    streaming query), replacing the registration pyspark made through `pyspark_staticmq`."""
    if is_connect_session(session):  # Spark Connect: no JVM here, the class goes to the server
        return register_over_connect(session)
    from staticmq_spark.data_source import StaticMQDataSource
    from staticmq_spark.workers.site import register

    register(session, StaticMQDataSource)
    return session


class _RegisteringBuilder:
    """Wraps a SparkSession.Builder so that every session it makes has `staticmq` registered."""

    def __init__(self, builder: Any) -> None:
        self._builder = builder

    def getOrCreate(self) -> Any:
        return _register(self._builder.getOrCreate())

    def create(self) -> Any:
        return _register(self._builder.create())

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._builder, name)
        if not callable(attribute):
            return attribute

        def chained(*args: Any, **kwargs: Any) -> Any:
            result = attribute(*args, **kwargs)
            return self if result is self._builder else result

        return chained


def local_cores(master: str | None) -> int | None:
    """The cores of a `local`, `local[N]` or `local[*]` master (also `local[N,F]`); None otherwise."""
    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", (master or "").strip())
    if found is None:
        return None
    cores = found.group(1)
    if cores is None:
        return 1
    return (os.cpu_count() or 1) if cores == "*" else max(1, int(cores))


def configure_spark(builder: Any, *, delta: bool = False) -> Any:
    """`builder` with staticmq registered and, with `delta=True`, Delta Lake's extension, catalog
    and jars. Returns a builder: chain `.config(...)` and end with `.getOrCreate()`.

    With Delta on a local master set before this call (`local[N]`), Delta rebuilds a table's
    state after each commit in N tasks instead of its default 50
    (`spark.databricks.delta.snapshotPartitions`, unless the caller set it): on 2 cores the
    50 tasks took about 2.5 s of every streaming micro-batch after the first.

    On a pyspark whose Python sources have no admission control (4.0, 4.1: pyspark_features) it
    also turns on Spark's Trigger.AvailableNow wrapper (`AVAILABLE_NOW_WRAPPER`, unless the caller
    set it): without it Spark runs AvailableNow as one micro-batch, and a query restarted with a
    micro-batch left uncommitted only replays that one and stops, leaving newer messages behind;
    with it the query also reads everything that was there when it started.

    It also has Spark talk to its Python workers over Unix domain sockets
    (`spark.python.unix.domain.socket.enabled`, unless the caller set it; pyspark 4.1 and later,
    4.0 ignores it): over TCP each Python task waited up to 40 ms for a delayed acknowledgement
    (docs/investigations/2026-11-28-python-task-socket.md). staticmq's own workers avoid that wait
    over TCP too (`workers/site`); this setting also spares every other Python task of the session."""
    check_connect_builder(builder, delta=delta)
    from staticmq_spark.session.features import AVAILABLE_NOW_SPLITS

    options = getattr(builder, "_options", {})  # the caller's settings (config() adds to this dict)
    if not AVAILABLE_NOW_SPLITS and AVAILABLE_NOW_WRAPPER not in options:
        builder = builder.config(AVAILABLE_NOW_WRAPPER, "true")
    if UNIX_DOMAIN_SOCKETS not in options:
        builder = builder.config(UNIX_DOMAIN_SOCKETS, "true")
    if delta:
        settings = delta_conf()
        given = options.get("spark.jars")
        if given:  # jars the caller set stay on the list
            settings["spark.jars"] = f"{given},{settings['spark.jars']}"
        cores = local_cores(options.get("spark.master"))
        if cores is not None and SNAPSHOT_PARTITIONS not in options:
            settings[SNAPSHOT_PARTITIONS] = str(cores)
        for key, value in settings.items():
            builder = builder.config(key, value)
    return _RegisteringBuilder(builder)
