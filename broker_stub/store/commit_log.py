"""The commit log: append-only segment files holding the records of every queue of a broker.

Positions are global byte offsets: segment files are named by the position of their first byte
and follow each other without gaps. A record never spans two segments. A file of whole records
written elsewhere (a sink staging file) can be adopted as the next segment, by rename: its bytes
are not written twice; appends then continue in a new segment after it. Appends are serialised
by the caller (the message store's append lock); reads take a snapshot of the segment list and
never block appends.

Every record's CRC is checked before any of its bytes is served: each segment keeps a frontier
below which its records were verified (records this process appended count as verified); a read
past the frontier first checks the records up to it. A damaged record stops the read with
DataCorruptError naming the file and the byte offset, a log line and a metric.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from broker_stub.metrics import CORRUPT_RECORDS, FLUSH_SECONDS
from broker_stub.store.atomic_file import fsync_path, pwrite_all
from broker_stub.store.record import (
    HEADER_SIZE,
    MisalignedRead,
    RecordError,
    RecordHeader,
    decode_header,
    first_bad_row,
    parse_record,
)
from broker_stub.store.retired_fds import RetiredFds
from broker_stub.store.spans import distinct_sorted, pieces_of
from staticmq_spark.errors import DataCorruptError
from staticmq_spark.protocol.rows.codec import Int32Array, Int64Array

log = logging.getLogger(__name__)

SUFFIX = ".log"
_MANY_RUNS = 64


class DataGoneError(Exception):
    """The positions asked for lie in segments already deleted by retention."""


@dataclass(eq=False)
class Segment:
    base: int
    path: Path
    fd: int
    size: int
    mtime: float = field(default_factory=time.time)
    sealed: bool = False  # adopted: appends go to a new segment after it
    verified: int = -1  # records in [base, verified) were checked (-1: from base on, none)
    damaged: list[tuple[int, int]] = field(default_factory=list)  # checked records that failed

    def __post_init__(self) -> None:
        if self.verified < 0:
            self.verified = self.base

    @property
    def end(self) -> int:
        return self.base + self.size


def _where(seg: Segment, pos: int) -> str:
    return f"commit log file {seg.path} at byte {pos - seg.base} (log position {pos})"


class CommitLog:
    def __init__(self, directory: Path, segment_bytes: int, retired: RetiredFds) -> None:
        self._dir = directory
        self._segment_bytes = segment_bytes
        self._segments: tuple[Segment, ...] = ()
        self._bases: Int64Array = np.zeros(0, dtype=np.int64)
        self._unsynced: set[Segment] = set()
        self._unsynced_lock = threading.Lock()
        self._retired = retired
        self._verify_lock = threading.Lock()

    # ------------------------------------------------------------------ open / recover

    def open(self) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        segments = []
        for path in sorted(self._dir.glob(f"*{SUFFIX}")):
            base = int(path.stem)
            fd = os.open(path, os.O_RDWR)
            st = os.fstat(fd)
            segments.append(Segment(base, path, fd, st.st_size, st.st_mtime))
        for prev, nxt in itertools.pairwise(segments):
            if prev.end != nxt.base:
                log.warning("commit log gap: %s ends at %d, %s starts at %d", prev.path, prev.end, nxt.path, nxt.base)
        self._publish(segments)

    def recover(self, verify_from: int) -> Iterator[tuple[int, RecordHeader, Int32Array]]:
        """Check every record from `verify_from` on (CRC included) and yield it; cut the log at
        the first torn or corrupt record and drop everything after it."""
        segments = list(self._segments)
        for i, seg in enumerate(segments):
            if seg.end <= verify_from:
                continue
            p = verify_from if seg.base <= verify_from < seg.end else seg.base
            while p < seg.end:
                try:
                    header, sizes, total = self._check_record(seg, p)
                except RecordError as exc:
                    log.warning("commit log: cutting %s at %d (%s)", seg.path.name, p, exc)
                    self._truncate(seg, p)
                    for later in segments[i + 1 :]:
                        self._remove_file(later)
                    self._publish(segments[: i + 1])
                    return
                yield p, header, sizes
                p += total

    def scan(self, from_pos: int) -> Iterator[tuple[int, RecordHeader, Int32Array]]:
        """Every record from `from_pos` on, CRC-checked, changing nothing: a damaged record whose
        length is readable is skipped, an unreadable one ends its segment."""
        for seg in list(self._segments):
            p = max(from_pos, seg.base)
            while p < seg.end:
                try:
                    header, sizes, total = self._check_record(seg, p)
                except (RecordError, OSError, ValueError) as exc:
                    length = self._readable_length(seg, p)
                    log.error("commit log scan: damaged record in %s: %s", _where(seg, p), exc)
                    if length is None:
                        break
                    p += length
                    continue
                yield p, header, sizes
                p += total

    def walk_headers(self, last_bytes: int, stop: int) -> Iterator[tuple[int, RecordHeader]]:
        """Record headers (no CRC check) of the newest segments holding at least `last_bytes`
        (at least the newest segment), below `stop`."""
        segs = self._segments
        first, held = len(segs), 0
        while first > 0 and (held < last_bytes or first == len(segs)):
            first -= 1
            held += segs[first].size
        for seg in segs[first:]:
            p = seg.base
            while p < min(seg.end, stop):
                head = os.pread(seg.fd, HEADER_SIZE + 2 * 1024 + 256, p - seg.base)
                try:
                    total, crc, topic_len, queue_id, base, count, ts, uid, attr_len, flags = decode_header(
                        head, seg.end - p
                    )
                except RecordError:
                    break
                if len(head) < HEADER_SIZE + topic_len + attr_len:
                    head = os.pread(seg.fd, HEADER_SIZE + topic_len + attr_len, p - seg.base)
                topic = head[HEADER_SIZE : HEADER_SIZE + topic_len].decode(errors="replace")
                attrs = head[HEADER_SIZE + topic_len : HEADER_SIZE + topic_len + attr_len]
                yield p, RecordHeader(total, crc, topic, queue_id, base, count, ts, uid, attrs, flags)
                p += total

    def record_at(self, pos: int) -> tuple[RecordHeader, Int32Array]:
        """The record at `pos`, fully checked (CRC included)."""
        header, sizes, _ = self._check_record(self._segment_at(pos), pos)
        return header, sizes

    def _check_record(self, seg: Segment, pos: int) -> tuple[RecordHeader, Int32Array, int]:
        available = seg.end - pos
        head = os.pread(seg.fd, HEADER_SIZE, pos - seg.base)
        total = decode_header(head, available)[0]
        record = os.pread(seg.fd, total, pos - seg.base)
        header, sizes = parse_record(record)
        return header, sizes, total

    def _truncate(self, seg: Segment, pos: int) -> None:
        os.ftruncate(seg.fd, pos - seg.base)
        os.fsync(seg.fd)
        seg.size = pos - seg.base

    def _remove_file(self, seg: Segment) -> None:
        os.close(seg.fd)
        seg.path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ positions

    @property
    def written_pos(self) -> int:
        segs = self._segments
        return segs[-1].end if segs else 0

    @property
    def min_pos(self) -> int:
        segs = self._segments
        return segs[0].base if segs else 0

    def total_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # ------------------------------------------------------------------ append (caller serialises)

    def append(self, parts: list[bytes | memoryview]) -> int:
        """Write one record; returns its position. Not thread-safe: the store's lock guards it."""
        total = sum(len(p) for p in parts)
        segs = self._segments
        if not segs or segs[-1].sealed or (segs[-1].size > 0 and segs[-1].size + total > self._segment_bytes):
            segs = self._roll()
        seg = segs[-1]
        pos = seg.end
        pwrite_all(seg.fd, parts, seg.size)
        seg.size += total
        with self._verify_lock:
            if seg.verified == pos:  # written from memory just now: nothing to check
                seg.verified = pos + total
        seg.mtime = time.time()
        with self._unsynced_lock:
            self._unsynced.add(seg)
        return pos

    def adopt(self, paths: list[Path]) -> list[int]:
        """Make each file (whole records, durable) the next segment, by rename, and return their
        positions. The caller serialises this with appends and has synced the log first: a
        torn tail before an adopted segment would cut it off at recovery."""
        bases = self.planned_bases(paths)
        segments = list(self._segments)
        for path, base in zip(paths, bases, strict=True):
            target = self._dir / f"{base:020d}{SUFFIX}"
            os.rename(path, target)
            fd = os.open(target, os.O_RDWR)
            segments.append(Segment(base, target, fd, os.fstat(fd).st_size, sealed=True))
        fsync_path(self._dir)
        self._publish(segments)
        return bases

    def segment_file(self, base: int) -> Path | None:
        """The file of the segment starting at `base`, if there is one."""
        for seg in self._segments:
            if seg.base == base:
                return seg.path
        return None

    def planned_bases(self, paths: list[Path]) -> list[int]:
        """Where `adopt(paths)` would put the files now."""
        bases, base = [], self.written_pos
        for path in paths:
            bases.append(base)
            base += path.stat().st_size
        return bases

    def _roll(self) -> tuple[Segment, ...]:
        base = self.written_pos
        path = self._dir / f"{base:020d}{SUFFIX}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fsync_path(self._dir)
        segs = (*self._segments, Segment(base, path, fd, 0))
        self._publish(list(segs))
        return self._segments

    def _publish(self, segments: list[Segment]) -> None:
        self._segments = tuple(segments)
        self._bases = np.array([s.base for s in segments], dtype=np.int64)

    # ------------------------------------------------------------------ durability

    def sync(self) -> None:
        """fsync every segment written since the last sync."""
        with self._unsynced_lock:
            dirty, self._unsynced = self._unsynced, set()
        for seg in dirty:
            try:
                with FLUSH_SECONDS.time():
                    os.fsync(seg.fd)
            except OSError:
                if seg in self._segments:
                    raise

    # ------------------------------------------------------------------ reads

    def read_record(self, pos: int) -> bytes:
        seg = self._segment_at(pos)
        head = os.pread(seg.fd, HEADER_SIZE, pos - seg.base)
        total = decode_header(head, seg.end - pos)[0]
        self._verify_to(seg, pos + total)
        if seg.damaged:
            self._refuse_damaged(seg, np.array([pos], dtype=np.int64), np.array([pos + total], dtype=np.int64))
        return os.pread(seg.fd, total, pos - seg.base)

    def _verify_to(self, seg: Segment, upto: int) -> None:
        """Check the CRC of every record of `seg` below `upto` not checked yet. A record whose CRC
        fails but whose length is readable is remembered as damaged and skipped; one whose header
        is unreadable ends what can be checked (nothing after it is served)."""
        if seg.verified >= upto:
            return
        with self._verify_lock:
            p = seg.verified
            while p < upto:
                try:
                    _, _, total = self._check_record(seg, p)
                except (RecordError, OSError, ValueError) as exc:
                    length = self._readable_length(seg, p)
                    where = _where(seg, p)
                    CORRUPT_RECORDS.inc()
                    log.error("damaged record in %s: %s; it is not served", where, exc)
                    if length is None:
                        seg.verified = max(seg.verified, p)
                        raise DataCorruptError(
                            f"damaged record in {where}: {exc}; it and what follows in this file are not served"
                        ) from None
                    seg.damaged.append((p, p + length))
                    total = length
                p += total
            seg.verified = max(seg.verified, p)

    def _readable_length(self, seg: Segment, pos: int) -> int | None:
        try:
            total = decode_header(os.pread(seg.fd, HEADER_SIZE, pos - seg.base), seg.end - pos)[0]
        except (RecordError, OSError, ValueError):
            return None
        return total if 0 < total <= seg.end - pos else None

    def _refuse_damaged(self, seg: Segment, pos: Int64Array, end: Int64Array) -> None:
        for lo, hi in seg.damaged:
            hit = np.flatnonzero((pos < hi) & (end > lo))
            if hit.size:
                raise DataCorruptError(f"damaged record in {_where(seg, lo)}: its CRC does not match; it is not served")

    def _segment_at(self, pos: int) -> Segment:
        segs = self._segments
        i = int(np.searchsorted(self._bases, pos, side="right")) - 1
        if i < 0 or pos >= segs[i].end:
            raise DataGoneError(f"position {pos} is not in the commit log")
        return segs[i]

    def read_many(self, pos: Int64Array, size: Int32Array) -> bytes:
        """The bytes of the given (position, size) spans, concatenated in order."""
        segs, bases = self._segments, self._bases
        n = int(pos.shape[0])
        if n == 0:
            return b""
        seg_idx = np.searchsorted(bases, pos, side="right") - 1
        if int(seg_idx[0]) < 0:
            raise DataGoneError(f"position {int(pos[0])} was removed by retention")
        end = pos + size.astype(np.int64)
        touched = distinct_sorted(seg_idx)  # positions ascend, so do their segments
        for s in touched.tolist():
            mine = seg_idx == s
            upto = int(end[mine].max())
            if segs[s].verified < upto:
                self._verify_to(segs[s], upto)
            if segs[s].damaged:
                self._refuse_damaged(segs[s], pos[mine], end[mine])
        brk = np.flatnonzero((pos[1:] != end[:-1]) | (seg_idx[1:] != seg_idx[:-1])) + 1
        starts = np.concatenate(([0], brk))
        stops = np.concatenate((brk, [n]))
        try:
            if len(starts) <= _MANY_RUNS:
                data = b"".join(
                    self._pread(segs[int(seg_idx[a])], int(pos[a]), int(end[b - 1] - pos[a]))
                    for a, b in zip(starts.tolist(), stops.tolist(), strict=True)
                )
            else:
                data = self._gather(segs, seg_idx, pos, size, end)
        except OSError as exc:
            raise DataGoneError(f"commit log read failed: {exc}") from None
        # Rows of one record are contiguous; a run ends where a record (or a wrong entry) does.
        # The rows on both sides of every break must be whole messages of their indexed size.
        edges = np.empty(2 * len(starts), dtype=np.int64)  # s0 <= e0 < s1 <= e1 ...: sorted already
        edges[0::2], edges[1::2] = starts, stops - 1
        bad = first_bad_row(data, size, distinct_sorted(edges))
        if bad is not None:
            raise MisalignedRead(bad)
        return data

    def _gather(
        self, segs: tuple[Segment, ...], seg_idx: Int64Array, pos: Int64Array, size: Int32Array, end: Int64Array
    ) -> bytes:
        """Many small runs: read each segment's span once and gather with numpy."""
        out: list[bytes] = []
        for s in distinct_sorted(seg_idx).tolist():
            sel = np.flatnonzero(seg_idx == s)
            span_start, span_end = int(pos[sel[0]]), int(end[sel[-1]])
            wanted = int(size[sel].sum(dtype=np.int64))
            # one read of the whole span unless it is mostly bytes not wanted and large (a tag
            # filter taking 1 message in 10 still reads the span: one pread beats thousands)
            if span_end - span_start > 32 * wanted + (16 << 20):
                out.extend(self._pread(segs[s], int(pos[i]), int(size[i])) for i in sel.tolist())
                continue
            span = self._pread(segs[s], span_start, span_end - span_start)
            out.append(pieces_of(span, pos[sel] - span_start, size[sel].astype(np.int64)))
        return b"".join(out)

    @staticmethod
    def _pread(seg: Segment, pos: int, length: int) -> bytes:
        data = os.pread(seg.fd, length, pos - seg.base)
        if len(data) != length:
            raise DataGoneError(f"short read at {pos} in {seg.path.name}")
        return data

    # ------------------------------------------------------------------ retention

    def expired_prefix(self, now: float, retention_bytes: int, retention_s: float) -> int:
        """How many leading segments retention may delete (never the active one)."""
        segs = self._segments
        total = sum(s.size for s in segs)
        count = 0
        for seg in segs[:-1]:
            too_big = retention_bytes > 0 and total > retention_bytes
            too_old = retention_s > 0 and now - seg.mtime > retention_s
            if not (too_big or too_old):
                break
            total -= seg.size
            count += 1
        return count

    def drop_prefix(self, count: int) -> None:
        """Delete the `count` oldest segments. Caller holds the append lock."""
        if count <= 0:
            return
        segs = list(self._segments)
        gone, keep = segs[:count], segs[count:]
        self._publish(keep)
        for seg in gone:
            seg.path.unlink(missing_ok=True)
            self._retired.retire(seg.fd)
            log.info("retention: deleted commit log segment %s (%d bytes)", seg.path.name, seg.size)

    def close(self) -> None:
        self.sync()
        for seg in self._segments:
            os.close(seg.fd)
        self._segments = ()
