"""One broker process per data directory: a second one exits at once naming the holder's pid, and
a broker killed with SIGKILL leaves no lock behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from staticmq_spark.client import Admin, Producer
from staticmq_spark.local_clusters import LocalCluster


def test_second_broker_on_the_same_data_dir_exits_naming_the_holder(tmp_path: Path) -> None:
    with LocalCluster(brokers=1, data_dir=tmp_path / "c") as cluster:
        holder = cluster.broker_pid("broker-0")
        args = ["broker", "--name", "broker-0", "--namesrv", cluster.namesrv, "--port", "0"]
        data_dir = ["--data-dir", str(tmp_path / "c" / "broker-0")]
        second = subprocess.run(
            [sys.executable, "-m", "staticmq_spark.cli", *args, *data_dir], capture_output=True, text=True, timeout=60
        )
        assert second.returncode != 0
        assert f"in use by another broker process (pid {holder})" in second.stderr, second.stderr[-2000:]

        with Admin(cluster.namesrv) as admin:
            admin.update_static_topic("locked", 2, cluster=cluster.cluster_name)
        cluster.kill_broker("broker-0")  # SIGKILL: the kernel drops the lock with the process
        cluster.start_broker("broker-0")
        with Producer(cluster.namesrv, active_detection=False) as producer:
            assert producer.send("locked", b"after restart", key="k").queue_offset == 0
