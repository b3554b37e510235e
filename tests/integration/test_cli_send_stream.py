"""`staticmq send --stdin` streams: each line is sent as it arrives and acknowledged at once, so
`tail -f log | staticmq send --stdin` works (stdin stays open throughout the test)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.cli import read_line, staticmq


def test_send_stdin_acknowledges_each_line_before_stdin_closes(cluster_process, unique_topic) -> None:
    c = cluster_process(brokers=1)
    topic = unique_topic()
    staticmq("admin", "updateTopic", "-n", c.namesrv, "-t", topic, "-b", "broker-0", "-r", "1", "-w", "1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "staticmq_spark.cli", "send", "-n", c.namesrv, "-t", topic, "--stdin"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for i in range(3):
            proc.stdin.write(f"line-{i}\n".encode())
            proc.stdin.flush()
            ack = json.loads(read_line(proc.stdout))
            assert ack["queueOffset"] == i and ack["topic"] == topic
        assert proc.poll() is None, "send is still reading stdin"
        proc.stdin.close()
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
