"""RocketMQ's own Java producers, driven from Python for `bench.rocketmq_ceiling`:
bench/rocketmq_ceiling/java/RocketMQProducerBench.java compiled once against RocketMQ's cached jars,
one timed run per process, and the CPU its servers spent meanwhile."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from bench.common.cpu import cpu_of
from tests.support.rocketmq_tools import compile_client

JAVA_SOURCE = Path(__file__).parent / "java" / "RocketMQProducerBench.java"


class JavaProducer:
    """java/RocketMQProducerBench.java (beside this module), compiled once with javac against RocketMQ's cached jars
    (as tests/spark/test_source_group_start.py does with GroupConsumer.java)."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.classpath = compile_client(JAVA_SOURCE, workdir / "classes")

    def command(self, *args: object) -> list[str]:
        home = [f"-Duser.home={self.dir}", f"-Djava.io.tmpdir={self.dir}"]  # the client's logs go there
        return ["java", "-Xmx1g", *home, "-cp", self.classpath, "RocketMQProducerBench", *map(str, args)]

    def probe(self, namesrv: str, topic: str) -> str:
        """What the broker answers to a transactional batch (a MessageBatch through sendMessageInTransaction)."""
        done = subprocess.run(self.command(namesrv, topic, 0, 100, "probe-batch", 1, 16, "-"), check=False,
                              capture_output=True, text=True, timeout=180, cwd=self.dir,
                              stdin=subprocess.DEVNULL)  # fmt: skip
        for line in done.stdout.splitlines():
            if line.startswith('{"probe"'):
                answer = str(json.loads(line)["probe"])
                return re.sub(r"\s*For more information, please visit the url, \S+", "", answer)
        raise RuntimeError(f"the batch probe printed no answer (exit {done.returncode}): {done.stderr[-2000:]}")

    def run(self, namesrv: str, topic: str, rows: int, size: int, mode: str, threads: int, batch: int,
            warm_topic: str, server_pids: list[int], timeout_s: float = 900) -> dict[str, Any]:  # fmt: skip
        """One timed run; the servers' CPU is read when the program has warmed up and when it is done."""
        err_path = self.dir / f"{topic}.err"
        with open(err_path, "w") as err:
            cmd = self.command(namesrv, topic, rows, size, mode, threads, batch, warm_topic)
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                    cwd=self.dir)  # fmt: skip
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None
            _read_until(proc.stdout, "READY", err_path)
            before = cpu_of(server_pids)
            proc.stdin.write("go\n")
            proc.stdin.flush()
            line = _read_until(proc.stdout, "{", err_path)
            server = cpu_of(server_pids) - before
            if proc.wait(120) != 0:
                raise RuntimeError(f"RocketMQProducerBench exited {proc.returncode}: {_tail(err_path)}")
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return {**json.loads(line), "server_cpu_s": server}


def _read_until(stream: IO[str], prefix: str, err_path: Path) -> str:
    for line in stream:  # RocketMQ's logback prints its status lines on stdout too
        if line.startswith(prefix):
            return line
    raise RuntimeError(f"RocketMQProducerBench ended before printing {prefix!r}: {_tail(err_path)}")


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:]
