"""Apache RocketMQ's own tools as the tests and benchmarks drive them: a Java client program compiled
with javac against RocketMQ's cached jars, and a broker setting changed while the brokers run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from staticmq_spark.local_clusters.rocketmq import LocalRocketMQ, RocketMQClusterError, fetch_jars


def compile_client(source: Path, classes: Path, lib: Path | None = None) -> str:
    """`source` (a Java program using RocketMQ's client) compiled with javac into `classes`: the
    classpath to run it with (the jars in `lib`, RocketMQ's cached ones by default, and `classes`).
    A failed compile raises with javac's output."""
    lib = lib or fetch_jars()
    javac = ["javac", "-nowarn", "-cp", f"{lib}/*", "-d", str(classes), str(source)]
    done = subprocess.run(javac, check=False, timeout=300, capture_output=True, text=True)
    if done.returncode != 0:
        raise RocketMQClusterError(f"javac {source.name} failed ({done.returncode}): {done.stderr[-3000:]}")
    return f"{lib}/*:{classes}"


def update_broker_config(cluster: LocalRocketMQ, key: str, value: str | int) -> str:
    """Set one broker setting on every broker of `cluster` while they run (mqadmin's updateBrokerConfig)."""
    return cluster.mqadmin("updateBrokerConfig", "-c", "DefaultCluster", "-k", key, "-v", str(value))
