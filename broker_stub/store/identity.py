"""Data directory ownership: a directory belongs to one broker name, and says so; and one
process at a time uses it (an exclusive `flock` on `LOCK`, held until the process ends)."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from broker_stub.store.atomic_file import atomic_write_json, read_json
from staticmq_spark.errors import DataDirError

IDENTITY_FILE = "broker.json"
LOCK_FILE = "LOCK"
_held: dict[Path, int] = {}  # data dir -> the open lock file descriptor of this process


def lock_data_dir(data_dir: Path) -> None:
    """Take the directory's exclusive lock for this process, or fail at once naming the holder.

    The lock is a `flock` on `<data_dir>/LOCK`: the kernel drops it when the process dies, even by
    kill -9, so a crashed broker never blocks its restart. The file holds the holder's pid.
    """
    data_dir = data_dir.resolve()
    if data_dir in _held:
        return
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise DataDirError(
            f"{data_dir} is in use by another broker process (pid {holder}); "
            "one process per data directory: stop that one first"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    _held[data_dir] = fd


def claim_data_dir(data_dir: Path, broker_name: str) -> None:
    """Create or check `data_dir` for `broker_name`; refuse a directory of another broker."""
    data_dir.mkdir(parents=True, exist_ok=True)
    _check_owner(data_dir, broker_name)  # another broker's directory is refused, in use or not
    lock_data_dir(data_dir)
    if _check_owner(data_dir, broker_name):  # again under the lock: a fresh directory is claimed once
        return
    if any(p.name not in (IDENTITY_FILE, LOCK_FILE) for p in data_dir.iterdir()):
        raise DataDirError(
            f"{data_dir} is not empty and has no {IDENTITY_FILE}: it is not a staticmq broker "
            "data directory; refusing to use it"
        )
    atomic_write_json(data_dir / IDENTITY_FILE, {"broker": broker_name, "created": int(time.time() * 1000)})


def _check_owner(data_dir: Path, broker_name: str) -> bool:
    """True if `data_dir` is `broker_name`'s, False if it is unclaimed; raises if it is another's."""
    path = data_dir / IDENTITY_FILE
    try:
        found = read_json(path)
    except ValueError as exc:
        raise DataDirError(f"{path} is not valid JSON ({exc}); refusing to use {data_dir}") from None
    if found is None:
        return False
    owner = found.get("broker") if isinstance(found, dict) else None
    if owner != broker_name:
        raise DataDirError(
            f"{data_dir} belongs to broker {owner!r}, not {broker_name!r}; "
            "start that broker on it, or give this one its own directory"
        )
    return True
