"""A throw-away redis-server for the Redis comparison benchmarks (started and stopped by them)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from staticmq_spark.local_clusters.ports import free_port

INSTALL_HINT = (
    "redis-server is not installed; this benchmark starts its own Redis.\n"
    "Install it with:  sudo apt-get update && sudo apt-get install -y redis-server\n"
    "(and redis-py with hiredis:  pip install 'redis[hiredis]')"
)


def redis_available() -> bool:
    """Whether redis-server and redis-py are here; prints how to install them when not."""
    try:
        import redis  # noqa: F401
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return False
    if shutil.which("redis-server") is None:
        print(INSTALL_HINT, file=sys.stderr)
        return False
    return True


class RedisServer:
    """redis-server on 127.0.0.1, AOF on with fsync every second, no RDB snapshots, in a temp dir;
    `with RedisServer() as client` yields a connected redis-py client."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-redis-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Any:
        import redis

        args = ["--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir), "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "everysec", "--logfile", "redis.log"]
        self.proc = subprocess.Popen(["redis-server", *args], stdin=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                return client
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.__exit__()
                    raise
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)
