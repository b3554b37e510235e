"""Spark Connect for `configure_spark`: which builders make a Connect session, registering
`staticmq` over one, and refusing what cannot work there.

A Spark Connect client (`SparkSession.builder.remote("sc://...")`, `SPARK_REMOTE`,
`spark.api.mode=connect`, the `pyspark-client` package, Databricks serverless and shared clusters)
has no JVM of its own: a server runs its queries. So, on a Connect session:

- `format("staticmq")` is registered with `session.dataSource.register(StaticMQDataSource)`: the
  client sends the class, the server's Python workers import it (staticmq must be installed
  there). `workers/site`'s faster worker start needs the JVM `SparkContext`, which a client cannot
  reach: it is left out.
- `delta=True` cannot work on a server that is already running: Delta Lake's jars (`spark.jars`)
  and SQL extension (`spark.sql.extensions`) are settings of the server's JVM, fixed when it
  started; a client that sets them gets only warnings (`CANNOT_MODIFY_CONFIG`,
  `CANNOT_MODIFY_STATIC_CONFIG`) and a session without Delta, while `spark.sql.catalog.spark_catalog`
  (a runtime setting) would be switched to Delta's catalog that the server cannot load. It is
  refused before any jar is fetched. A `remote("local[N]")` builder is different: pyspark starts
  the Connect server in this process with the builder's settings, so Delta's jars reach its JVM.

Pure: nothing here imports pyspark (the client and the CLI load without it); builders and sessions
are told apart by their class and options, the way pyspark's `Builder.getOrCreate` decides.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from staticmq_spark.errors import UnsupportedOperationError

LOCAL = "local"
"""`connect_target`'s answer for a Connect server that pyspark starts in this process."""

_CONNECT_MODULE = "pyspark.sql.connect."
_DEFAULT_URL = "sc://localhost"


def is_connect_session(session: Any) -> bool:
    """Whether `session` is a Spark Connect client session (pyspark's, or Databricks Connect's,
    which ships the same module), not a classic session with a JVM in this process."""
    return type(session).__module__.startswith(_CONNECT_MODULE)


def _pyspark_says(function: str) -> Any:
    """pyspark.util's `function()` when pyspark is loaded and has it (4.0 and later), else None."""
    found = getattr(sys.modules.get("pyspark.util"), function, None)
    return found() if callable(found) else None


def connect_target(builder: Any, environ: dict[str, str] | None = None) -> str | None:
    """Where the session of `builder.getOrCreate()` runs its queries when it is a Spark Connect
    session: the `sc://` address of a running server, or `LOCAL` when pyspark starts the server in
    this process from the builder's settings; None for a classic session.

    Mirrors pyspark 4's `SparkSession.Builder.getOrCreate`: a Connect builder (its class lives in
    `pyspark.sql.connect`), `spark.remote` on the builder or `SPARK_REMOTE`, a Connect session
    made earlier in this process (`SPARK_CONNECT_MODE_ENABLED`, `SPARK_LOCAL_REMOTE`), the
    `connect` API mode (`spark.api.mode` or `SPARK_API_MODE`), or a pyspark without a JVM side
    (`pyspark-client`)."""
    env = os.environ if environ is None else environ
    options: dict[str, Any] = dict(getattr(builder, "_options", None) or {})
    remote = options.get("spark.remote", env.get("SPARK_REMOTE"))
    if type(builder).__module__.startswith(_CONNECT_MODULE) or _pyspark_says("is_remote_only") is True:
        return _target(str(remote or _DEFAULT_URL))
    if "SPARK_LOCAL_REMOTE" in env:  # a local server started earlier: its JVM is running
        return _DEFAULT_URL
    mode = str(options.get("spark.api.mode", env.get("SPARK_API_MODE", ""))).lower()
    if mode not in ("classic", "connect"):
        mode = str(_pyspark_says("default_api_mode") or "classic")
    if remote is not None:
        return _target(str(remote))
    if mode == "connect":
        return _target(str(options.get("spark.master", env.get("MASTER", LOCAL))))
    if "SPARK_CONNECT_MODE_ENABLED" in env:
        return _DEFAULT_URL
    return None


def _target(url: str) -> str:
    return url if url.startswith("sc://") else LOCAL


def check_connect_builder(builder: Any, *, delta: bool) -> None:
    """Raises `UnsupportedOperationError`, saying what to do instead, where `configure_spark`
    cannot do what it is asked: `delta=True` on a builder of a running Spark Connect server."""
    target = connect_target(builder)
    if not delta or target is None or target == LOCAL:
        return
    raise UnsupportedOperationError(
        f"configure_spark(delta=True) cannot add Delta Lake to a Spark Connect session ({target}): "
        "Delta's jars and SQL extension are settings of the server's JVM, fixed when the server "
        "started, and a Connect client cannot change them. Start the Connect server with Delta "
        "Lake (the --jars and --conf flags of docs/delta.md's spark-submit; Databricks has Delta "
        "built in) and call configure_spark(builder) without delta=True, or use "
        'SparkSession.builder.remote("local[N]"), whose server pyspark starts with the settings '
        "given here."
    )


def register_over_connect(session: Any) -> Any:
    """Registers `staticmq` in the Connect session `session` (the class goes to the server) and
    returns the session. A server of Spark 4.0 or 4.1 refuses to replace the registration its own
    lookup made from an installed staticmq (`DATA_SOURCE_ALREADY_EXISTS`): that one, the same data
    source, stays."""
    from staticmq_spark.data_source import StaticMQDataSource
    from staticmq_spark.session.features import register_data_source

    register_data_source(session, StaticMQDataSource)
    return session
