"""The consume queue: one physical queue's index, queue offset -> (position, size, tag code, store time).

Entries are fixed-width (24 bytes) and live in files of `entries_per_file` entries named by the
offset of their first entry, so offset o is at byte (o % entries_per_file) * 24 of file
o // entries_per_file. Offsets start at 0 and are contiguous; retention raises `min_offset`. The
tag code (`flags`, protocol.consume.tag_filter) lets a pull with a tag filter skip messages without reading
them; entries written before tag codes existed, linked by the sink or rebuilt by recovery have
UNKNOWN (0) there, and a filter keeps them for the reader to check.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt

from broker_stub.store.retired_fds import RetiredFds
from staticmq_spark.protocol.rows.codec import Int32Array

ENTRY_DTYPE = np.dtype([("pos", "<i8"), ("size", "<i4"), ("flags", "<i4"), ("store_ts", "<i8")])
ENTRY_SIZE = ENTRY_DTYPE.itemsize  # 24
SUFFIX = ".cq"

Entries = npt.NDArray[np.void]


class ConsumeQueue:
    def __init__(self, directory: Path, entries_per_file: int, retired: RetiredFds) -> None:
        self.directory = directory
        self._retired = retired
        self._per_file = entries_per_file
        self._fds: dict[int, int] = {}
        self._dirty: set[int] = set()
        self._lock = threading.Lock()
        self.max_offset = 0  # exclusive: the offset the next message gets
        self.min_offset = 0

    # ------------------------------------------------------------------ open / recover

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        files = sorted(int(p.stem) for p in self.directory.glob(f"*{SUFFIX}"))
        for first in files:
            self._fds[first // self._per_file] = os.open(self._path(first // self._per_file), os.O_RDWR)
        if not files:
            return
        last = files[-1] // self._per_file
        size = os.fstat(self._fds[last]).st_size
        if size % ENTRY_SIZE:
            os.ftruncate(self._fds[last], size - size % ENTRY_SIZE)
            size -= size % ENTRY_SIZE
        self.max_offset = last * self._per_file + size // ENTRY_SIZE
        self.min_offset = min(self._fds) * self._per_file

    def truncate_beyond(self, valid_end: int) -> None:
        """Drop trailing entries that point at commit-log bytes at or past `valid_end`."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:  # first offset whose entry ends past valid_end
            mid = (lo + hi) // 2
            e = self.read(mid, 1)[0]
            if int(e["pos"]) + int(e["size"]) > valid_end:
                hi = mid
            else:
                lo = mid + 1
        if lo < self.max_offset:
            self.truncate_to(lo)

    def truncate_to(self, offset: int) -> None:
        """Keep entries below `offset` only."""
        with self._lock:
            for index in sorted(self._fds):
                first = index * self._per_file
                if first >= offset and index != offset // self._per_file:
                    os.close(self._fds.pop(index))
                    self._path(index).unlink(missing_ok=True)
            index = offset // self._per_file
            if index in self._fds:
                os.ftruncate(self._fds[index], (offset % self._per_file) * ENTRY_SIZE)
            self.max_offset = max(offset, self.min_offset)

    # ------------------------------------------------------------------ append / read

    def append(self, entries: Entries) -> int:
        """Append entries at max_offset; returns the offset of the first. Caller serialises."""
        base = self.max_offset
        raw = entries.tobytes()
        done = 0
        offset = base
        while done < len(entries):
            index, slot = divmod(offset, self._per_file)
            take = min(len(entries) - done, self._per_file - slot)
            fd = self._fd_for_write(index)
            chunk = raw[done * ENTRY_SIZE : (done + take) * ENTRY_SIZE]
            view = memoryview(chunk)
            at = slot * ENTRY_SIZE
            while view:
                n = os.pwrite(fd, view, at)
                view, at = view[n:], at + n
            self._dirty.add(index)
            done += take
            offset += take
        self.max_offset = offset
        return base

    def _fd_for_write(self, index: int) -> int:
        fd = self._fds.get(index)
        if fd is None:
            with self._lock:
                fd = os.open(self._path(index), os.O_RDWR | os.O_CREAT, 0o644)
                self._fds[index] = fd
        return fd

    def read(self, offset: int, count: int) -> Entries:
        """Entries [offset, offset+count) (fewer if the queue ends earlier)."""
        count = max(0, min(count, self.max_offset - offset))
        parts = []
        while count > 0:
            index, slot = divmod(offset, self._per_file)
            take = min(count, self._per_file - slot)
            fd = self._fds.get(index)
            if fd is None:
                break
            raw = os.pread(fd, take * ENTRY_SIZE, slot * ENTRY_SIZE)
            got = len(raw) // ENTRY_SIZE
            parts.append(np.frombuffer(raw, dtype=ENTRY_DTYPE, count=got))
            if got < take:
                break
            offset += take
            count -= take
        if not parts:
            return np.zeros(0, dtype=ENTRY_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def recent_average_size(self, window: int = 1024) -> int:
        """Mean stored size of the newest `window` messages (0 when empty)."""
        start = max(self.min_offset, self.max_offset - window)
        entries = self.read(start, self.max_offset - start)
        return int(entries["size"].mean()) if len(entries) else 0

    def last_store_timestamp(self) -> int:
        if self.max_offset <= self.min_offset:
            return 0
        return int(self.read(self.max_offset - 1, 1)[0]["store_ts"])

    def first_offset_where(self, field: str, value: int) -> int:
        """The first offset in [min, max) whose `field` >= value (entries are sorted on both
        `pos` and `store_ts`); max_offset if there is none."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entries = self.read(mid, 1)
            if not len(entries) or int(entries[0][field]) >= value:
                hi = mid
            else:
                lo = mid + 1
        return lo

    # ------------------------------------------------------------------ retention / durability

    def advance_min(self, commit_log_min_pos: int) -> None:
        """Raise min_offset past entries whose data retention deleted; drop whole files."""
        new_min = self.first_offset_where("pos", commit_log_min_pos)
        with self._lock:
            self.min_offset = max(self.min_offset, new_min)
            keep_from = self.min_offset // self._per_file
            for index in [i for i in self._fds if i < keep_from]:
                self._retired.retire(self._fds.pop(index))
                self._path(index).unlink(missing_ok=True)
                self._dirty.discard(index)

    def sync(self) -> None:
        """fsync the files written since the last sync (a file retention just removed is skipped;
        any other failure propagates: the checkpoint must not claim what is not on disk)."""
        dirty, self._dirty = self._dirty, set()
        for index in dirty:
            fd = self._fds.get(index)
            if fd is not None:
                try:
                    os.fsync(fd)
                except OSError as exc:
                    if exc.errno != errno.EBADF or index in self._fds:
                        self._dirty.add(index)
                        raise

    def close(self) -> None:
        self.sync()
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    def destroy(self) -> None:
        """Delete the queue's files; descriptors are retired, not closed, for in-flight reads."""
        with self._lock:
            for fd in self._fds.values():
                self._retired.retire(fd)
            self._fds.clear()
            self.max_offset = self.min_offset = 0
        shutil.rmtree(self.directory, ignore_errors=True)

    def _path(self, index: int) -> Path:
        return self.directory / f"{index * self._per_file:020d}{SUFFIX}"


def entries_for(rows_at: int, sizes: Int32Array, store_ts: int, tag_codes: Int32Array | None = None) -> Entries:
    """The entries of messages stored back to back from commit-log position `rows_at`, each with
    its tag code (protocol.consume.tag_filter) in `flags` (UNKNOWN, 0, when not given)."""
    entries = np.zeros(sizes.shape[0], dtype=ENTRY_DTYPE)
    if tag_codes is not None:
        entries["flags"] = tag_codes
    starts = np.zeros(sizes.shape[0], dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    entries["pos"] = rows_at + starts
    entries["size"] = sizes
    entries["store_ts"] = store_ts
    return entries
