"""tests/support/java/PopPeer.java (RocketMQ's remoting client) or SimplePeer.java (its gRPC
SimpleConsumer, through the proxy) run as one long-lived process: started (and its JVM warm)
before a test pops, then told to pop or ack over its stdin, so no JVM start or exit falls inside a
message's invisible time."""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections.abc import Sequence
from types import TracebackType


class JavaPopPeer:
    def __init__(self, command: Sequence[str], start_timeout_s: float = 120.0) -> None:
        self._proc = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._err: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        try:
            self._until("READY", start_timeout_s)
        except BaseException:
            self.close()
            raise

    def pop(self, want: int, timeout_s: float, invisible_ms: int) -> list[tuple[str, str]]:
        """(body, handle) of what the Java client popped, once `want` came or `timeout_s` ran out."""
        self._send(f"pop {want} {int(timeout_s)} {invisible_ms}")
        lines = self._until("POPPED ", timeout_s + 60)
        return [(body, handle) for _, body, handle in (ln.split(" ", 2) for ln in lines if ln.startswith("MSG "))]

    def ack(self, handle: str, timeout_s: float = 60.0) -> str:
        """ "OK", or the AckStatus the broker answered the Java client's ack of `handle` with."""
        self._send(f"ack {handle}")
        return self._until("ACK ", timeout_s)[-1].removeprefix("ACK ")

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                self._send("quit")
                self._proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()

    def __enter__(self) -> JavaPopPeer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _send(self, line: str) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def _until(self, prefix: str, timeout_s: float) -> list[str]:
        """The lines up to and including the first that starts with `prefix`."""
        deadline = time.monotonic() + timeout_s
        seen: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                line = ""
            if line is None or (line == "" and time.monotonic() >= deadline):
                why = "exited" if line is None else f"did not answer {prefix!r} within {timeout_s:g}s"
                raise AssertionError(f"the Java peer {why}; its output: {seen}; stderr: {''.join(self._err)[-2000:]}")
            if line:
                seen.append(line)
                if line.startswith(prefix):
                    return seen

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _read_err(self) -> None:
        assert self._proc.stderr is not None
        for line in self._proc.stderr:
            self._err.append(line)
