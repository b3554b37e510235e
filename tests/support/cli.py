"""Running the `staticmq` command as a user does: a child process, its output captured."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from typing import IO


def staticmq(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "staticmq_spark.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def read_line(stream: IO[bytes], timeout: float = 30) -> bytes:
    deadline = time.monotonic() + timeout
    buf = b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([stream], [], [], left)[0]:
            raise AssertionError(f"no acknowledgement within {timeout}s (got {buf!r})")
        chunk = os.read(stream.fileno(), 1)
        if not chunk:
            raise AssertionError(f"stdout closed early (got {buf!r})")
        buf += chunk
    return buf
