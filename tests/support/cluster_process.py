"""Test helper: a cluster started exactly as a user starts one, `staticmq cluster --ready-file`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until


class ClusterProcess:
    def __init__(
        self, data_dir: Path, brokers: int = 2, settings: dict[str, Any] | None = None, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.data_dir = data_dir
        self.ready_file = data_dir.parent / f"{data_dir.name}.ready.json"
        args = [
            sys.executable,
            "-m",
            "staticmq_spark.cli",
            "cluster",
            "--brokers",
            str(brokers),
            "--data-dir",
            str(data_dir),
            "--namesrv-port",
            "0",
            "--ready-file",
            str(self.ready_file),
        ]
        for key, value in (settings or {}).items():
            args += ["--set", f"{key}={value}"]
        args += extra_args
        self.ready_file.unlink(missing_ok=True)
        self.log = (data_dir.parent / f"{data_dir.name}.cluster.log").open("ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.info = self._wait_ready()

    def _wait_ready(self, timeout_s: float = 60) -> dict[str, Any]:
        def ready() -> bool:
            if self.ready_file.exists():
                return True
            if self.proc.poll() is not None:
                raise RuntimeError(f"staticmq cluster exited with {self.proc.returncode}")
            return False

        wait_until(ready, timeout_s, message=f"staticmq cluster to write its ready file {self.ready_file}")
        data: dict[str, Any] = json.loads(self.ready_file.read_text())
        return data

    @property
    def namesrv(self) -> str:
        return str(self.info["namesrv"])

    def broker_pid(self, name: str) -> int:
        return int(self.info["brokers"][name]["pid"])

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        return self.proc.returncode
