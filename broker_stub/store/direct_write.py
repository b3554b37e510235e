"""Writing large records to a file past the page cache (O_DIRECT), for bytes that are written
once and not read soon: the sink's staged rows.

A write of `parts` at `offset` is cut in three: the unaligned head (up to the next 4 KiB
boundary of the file) and the unaligned tail go through the page cache as usual; the aligned
middle is copied into a reused, page-aligned buffer and written with O_DIRECT, so the device
takes it from there. The kernel neither allocates page-cache pages for it nor copies the bytes
into them (on the benchmark VM that copy, into freshly allocated pages, cost the broker more
CPU than anything else it did for the sink), and fsync later only has the head and tail pages
and the metadata to write. The file's contents are exactly those of a plain write: readers see
no difference, and a write cut short by a crash leaves a torn record, found by its CRC as
before.

Small writes (middle under DIRECT_MIN_BYTES), and every write once the file system refused
O_DIRECT (tmpfs, some network file systems), go through the page cache whole. One writer at a
time: the caller serializes writes (the aligned buffer is shared).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
from collections.abc import Sequence
from pathlib import Path

from broker_stub.store.atomic_file import pwrite_all

log = logging.getLogger(__name__)

BLOCK = 4096  # alignment of O_DIRECT offsets, lengths and buffers (covers 512-byte devices too)
DIRECT_MIN_BYTES = 256 << 10
_BUFFER_STEP = 1 << 20

Part = bytes | bytearray | memoryview


class DirectWriter:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled and hasattr(os, "O_DIRECT")
        self._buffer: mmap.mmap | None = None

    def write(self, path: Path, offset: int, parts: Sequence[Part]) -> None:
        """Write the concatenation of `parts` at `offset` of `path` (created if missing)."""
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        total = sum(len(v) for v in views)
        head = min(-offset % BLOCK, total)
        middle = (total - head) // BLOCK * BLOCK
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if (
                not self.enabled
                or middle < DIRECT_MIN_BYTES
                or not self._write_direct(path, offset + head, views, head, middle)
            ):
                pwrite_all(fd, _byte_range(views, 0, total), offset)
                return
            pwrite_all(fd, _byte_range(views, 0, head), offset)
            pwrite_all(fd, _byte_range(views, head + middle, total), offset + head + middle)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._buffer is not None:
            self._buffer.close()
            self._buffer = None

    def _write_direct(self, path: Path, at: int, views: list[memoryview], lo: int, length: int) -> bool:
        """Bytes [lo, lo + length) of the parts at `at` with O_DIRECT; False if the file system
        refuses O_DIRECT (nothing written then: the caller writes everything through the cache)."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self._refused(path, exc)
            return False
        try:
            buffer = self._aligned(length)
            with memoryview(buffer) as whole:
                pos = 0
                for piece in _byte_range(views, lo, lo + length):
                    whole[pos : pos + len(piece)] = piece
                    pos += len(piece)
                done = 0
                while done < length:
                    try:
                        n = os.pwrite(fd, whole[done:length], at + done)
                    except OSError as exc:
                        if exc.errno != errno.EINVAL or done:
                            raise
                        self._refused(path, exc)
                        return False
                    if n <= 0 or n % BLOCK:  # a short, unaligned write: finish through the cache
                        done += max(n, 0)
                        buffered = os.open(path, os.O_WRONLY)
                        try:
                            pwrite_all(buffered, [whole[done:length]], at + done)
                        finally:
                            os.close(buffered)
                        return True
                    done += n
            return True
        finally:
            os.close(fd)

    def _aligned(self, length: int) -> mmap.mmap:
        if self._buffer is None or len(self._buffer) < length:
            self.close()
            self._buffer = mmap.mmap(-1, -(-length // _BUFFER_STEP) * _BUFFER_STEP)  # page-aligned
        return self._buffer

    def _refused(self, path: Path, exc: OSError) -> None:
        self.enabled = False
        log.info("the file system of %s refuses O_DIRECT (%s): staged rows go through the page cache", path, exc)


def _byte_range(views: list[memoryview], lo: int, hi: int) -> list[memoryview]:
    """Bytes [lo, hi) of the views' concatenation, as slices of them (no copy)."""
    out = []
    start = 0
    for v in views:
        end = start + len(v)
        if end > lo and start < hi:
            out.append(v[max(lo - start, 0) : min(hi, end) - start])
        start = end
    return out
