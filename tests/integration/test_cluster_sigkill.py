"""`staticmq cluster` killed with SIGKILL takes its name server and brokers with it, so a restart
on the same data directory (same name server port) works and still has the data."""

from __future__ import annotations

import os
import signal

from tests.support.cli import staticmq
from tests.support.waiting import wait_until


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its reaper counts as gone
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], timeout: float = 30) -> None:
    wait_until(
        lambda: not any(alive(p) for p in pids),
        timeout,
        message=lambda: f"the killed cluster's processes to exit; {[p for p in pids if alive(p)]} still alive",
    )


def test_sigkill_of_the_cluster_stops_its_children_and_a_restart_works(cluster_process, tmp_path, unique_topic) -> None:
    data = tmp_path / "data"
    first = cluster_process(brokers=2, data_dir=data)
    topic = unique_topic()
    made = staticmq("admin", "updateTopic", "-n", first.namesrv, "-t", topic, "-c", "DefaultCluster")
    assert made.returncode == 0, made.stderr
    assert first.info["dataDir"] == str(data)  # the ready info's keys are camelCase too
    children = [int(first.info["namesrvPid"])] + [first.broker_pid(b) for b in ("broker-0", "broker-1")]
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait(10)
    try:
        wait_gone(children)
    finally:
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    second = cluster_process(brokers=2, data_dir=data)
    assert second.namesrv == first.namesrv  # the same port, freed by the old name server
    route = staticmq("admin", "topicRoute", "-n", second.namesrv, "-t", topic)
    assert route.returncode == 0 and topic in route.stdout, route.stderr
