"""Staged sink writes and their transaction records (the broker half of the sink's two-phase
commit). Layout under <data>/sink/:

    staging/<writer>/<batch>/<staging id>   chunks a task staged here (not yet visible)
    txn/<writer>/<batch>.plan               how the commit appends them (written at prepare)
    txn/<writer>/<batch>.bin                the commit decision (TxnDecision), then "committed"

A chunk file is a sequence of records [magic, crc, queue, seq, count, data_len][sizes][rows]; a
torn tail is ignored (its chunk was never acknowledged as durable: prepare fsyncs first).

While the broker runs, it keeps an index of each staging file it wrote itself from empty (or
read to its end without a torn record), every write of which succeeded: the index then says
exactly what reading the file would, so prepare need not read the rows. Any other file is read.
It also holds the rows of the chunks it staged last (up to HOLD_BYTES) for their commit.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from broker_stub.store.atomic_file import atomic_write_bytes, fsync_dir
from staticmq_spark.errors import DataLossError, InvalidArgumentError
from staticmq_spark.protocol.codec import PackedBatch

_HEAD = struct.Struct("<IIiiiI")
_BODY_HEAD = struct.Struct("<iiiI")
_MAGIC = 0x534D5354  # "SMST"
_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
KEEP_TXNS_PER_WRITER = 200
HOLD_BYTES = 128 << 20  # rows of recently staged chunks kept in memory for their commit


@dataclass(frozen=True, slots=True)
class Chunk:
    queue: int
    seq: int
    batch: PackedBatch


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """Where a staged chunk is in its file, and what it holds."""

    queue: int
    seq: int
    count: int
    data_len: int
    offset: int  # of its record

    @property
    def record_len(self) -> int:
        return _HEAD.size + 4 * self.count + self.data_len


def _checked(name: str, what: str) -> str:
    if not name or len(name) > 128 or not set(name) <= _NAME_OK:
        raise InvalidArgumentError(f"{what} {name!r} must be 1-128 letters, digits, '-' or '_'")
    return name


def _crc(queue: int, seq: int, count: int, data_len: int, sizes: bytes | memoryview, data: bytes | memoryview) -> int:
    crc = zlib.crc32(_BODY_HEAD.pack(queue, seq, count, data_len))
    crc = zlib.crc32(sizes, crc)
    return zlib.crc32(data, crc)


class SinkStaging:
    def __init__(self, root: Path) -> None:
        self._staging = root / "staging"
        self._txn = root / "txn"
        self._lock = threading.Lock()
        self._seqs: dict[Path, set[int]] = {}
        self._known: dict[Path, dict[int, ChunkInfo]] = {}  # files whose index is exact (see above)
        self._held: OrderedDict[tuple[Path, int], PackedBatch] = OrderedDict()  # chunks written, oldest first
        self._held_bytes = 0

    # ------------------------------------------------------------------ staging

    def _file(self, writer: str, batch: int, staging_id: str) -> Path:
        return self._staging / _checked(writer, "writer") / str(batch) / _checked(staging_id, "staging id")

    def stage(self, writer: str, batch: int, staging_id: str, queue: int, seq: int, rows: PackedBatch) -> None:
        """Append one chunk; the same (staging id, seq) staged again is ignored."""
        path = self._file(writer, batch, staging_id)
        sizes = rows.sizes_bytes()
        crc = _crc(queue, seq, rows.count, len(rows.data), sizes, rows.data)
        head = _HEAD.pack(_MAGIC, crc, queue, seq, rows.count, len(rows.data))
        with self._lock:
            seqs = self._seqs.get(path)
            if seqs is None:
                infos, clean = self._scan(path)
                seqs = set(infos)
                self._seqs[path] = seqs
                if clean:
                    self._known[path] = infos
            if seq in seqs:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            known = self._known.pop(path, None)  # back only once this write is whole
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                offset = os.fstat(fd).st_size
                _write_all(fd, [head, sizes, rows.data])
            finally:
                os.close(fd)
            seqs.add(seq)
            if known is not None:
                known[seq] = ChunkInfo(queue, seq, rows.count, len(rows.data), offset)
                self._known[path] = known
            self._hold(path, seq, rows)

    def _hold(self, path: Path, seq: int, rows: PackedBatch) -> None:
        """Keep the rows of a chunk just written (exactly the file's bytes), so that its commit
        need not read them back; the oldest are let go beyond HOLD_BYTES. Caller holds the lock."""
        self._held[(path, seq)] = rows
        self._held_bytes += len(rows.data)
        while self._held_bytes > HOLD_BYTES:
            _, old = self._held.popitem(last=False)
            self._held_bytes -= len(old.data)

    def index(self, writer: str, batch: int, staging_id: str) -> dict[int, ChunkInfo]:
        """The readable chunks of a staging id, by seq."""
        path = self._file(writer, batch, staging_id)
        with self._lock:
            known = self._known.get(path)
            if known is not None:
                return dict(known)
        return self._scan(path)[0]

    def read(self, writer: str, batch: int, staging_id: str, info: ChunkInfo) -> PackedBatch:
        """The rows of one chunk of `index()`: those written by this process if still held, else
        read back and checked against their checksum."""
        path = self._file(writer, batch, staging_id)
        with self._lock:
            held = self._held.get((path, info.seq))
        if held is not None and (held.count, len(held.data)) == (info.count, info.data_len):
            return held
        try:
            with path.open("rb") as fh:
                fh.seek(info.offset)
                head = fh.read(_HEAD.size + 4 * info.count)
                data = fh.read(info.data_len)
        except FileNotFoundError:
            head = data = b""
        if len(head) == _HEAD.size + 4 * info.count and len(data) == info.data_len:
            magic, crc, queue, seq, count, data_len = _HEAD.unpack_from(head)
            sizes = memoryview(head)[_HEAD.size :]
            expected = (_MAGIC, info.queue, info.seq, info.count, info.data_len)
            if (magic, queue, seq, count, data_len) == expected and _crc(
                queue, seq, count, data_len, sizes, data
            ) == crc:
                return PackedBatch(data, np.frombuffer(sizes, dtype="<i4").astype(np.int32))
        raise DataLossError(f"staged chunk {info.seq} of {path} is damaged or missing")

    def chunks(self, writer: str, batch: int, staging_id: str) -> list[Chunk]:
        return [
            Chunk(info.queue, seq, self.read(writer, batch, staging_id, info))
            for seq, info in sorted(self.index(writer, batch, staging_id).items())
        ]

    def make_durable(self, writer: str, batch: int, staging_id: str) -> None:
        path = self._file(writer, batch, staging_id)
        if path.exists():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            fsync_dir(path.parent)

    @staticmethod
    def _scan(path: Path) -> tuple[dict[int, ChunkInfo], bool]:
        """The chunks of a file up to its first torn or damaged record, and whether there was none."""
        infos: dict[int, ChunkInfo] = {}
        try:
            fh = path.open("rb")
        except FileNotFoundError:
            return infos, True
        with fh:
            for info in _records(fh):
                if info is None:
                    return infos, False
                infos.setdefault(info.seq, info)
        return infos, True

    def drop_batches_up_to(self, writer: str, batch: int) -> None:
        """Staging of batches <= `batch` will never be committed any more: delete it."""
        root = self._staging / _checked(writer, "writer")
        if not root.exists():
            return
        for entry in root.iterdir():
            if entry.name.isdigit() and int(entry.name) <= batch:
                with self._lock:
                    for cache in (self._seqs, self._known):
                        for path in [p for p in cache if p.parent == entry]:
                            del cache[path]
                    for key in [k for k in self._held if k[0].parent == entry]:
                        self._held_bytes -= len(self._held.pop(key).data)
                shutil.rmtree(entry, ignore_errors=True)

    # ------------------------------------------------------------------ transaction records

    def _txn_file(self, writer: str, batch: int, suffix: str = ".bin") -> Path:
        return self._txn / _checked(writer, "writer") / f"{batch}{suffix}"

    def decision(self, writer: str, batch: int) -> tuple[bytes, bool] | None:
        """(serialized decision, committed) of a transaction, or None."""
        path = self._txn_file(writer, batch)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        return raw[1:], raw[:1] == b"C"

    def record_decision(self, writer: str, batch: int, decision: bytes, committed: bool) -> None:
        atomic_write_bytes(self._txn_file(writer, batch), (b"C" if committed else b"P") + decision)

    def record_plan(self, writer: str, batch: int, plan: list[tuple[int, list[tuple[str, int]]]]) -> None:
        """How commit appends the transaction's chunks: per append, its queue and its chunks
        (staging id, seq) in order. Written before the decision, so a stored decision always has
        the plan it was prepared with (except decisions of brokers older than plans)."""
        atomic_write_bytes(self._txn_file(writer, batch, ".plan"), json.dumps(plan, separators=(",", ":")).encode())

    def plan(self, writer: str, batch: int) -> list[tuple[int, list[tuple[str, int]]]] | None:
        try:
            raw = self._txn_file(writer, batch, ".plan").read_bytes()
        except FileNotFoundError:
            return None
        return [(int(q), [(str(s), int(n)) for s, n in chunks]) for q, chunks in json.loads(raw)]

    def forget_old_txns(self, writer: str, newest: int) -> None:
        root = self._txn / _checked(writer, "writer")
        for pattern in ("*.bin", "*.plan"):
            for path in root.glob(pattern):
                if path.stem.isdigit() and int(path.stem) < newest - KEEP_TXNS_PER_WRITER:
                    path.unlink(missing_ok=True)


def _records(fh: BinaryIO) -> Iterator[ChunkInfo | None]:
    """The records of a staging file in order, each checked; None for a torn or damaged one
    (and nothing after it)."""
    offset = 0
    while True:
        head = fh.read(_HEAD.size)
        if len(head) < _HEAD.size:
            if head:
                yield None
            return
        magic, crc, queue, seq, count, data_len = _HEAD.unpack(head)
        if magic != _MAGIC or count <= 0 or data_len < 0:
            yield None
            return
        body = fh.read(4 * count + data_len)
        if len(body) < 4 * count + data_len:
            yield None
            return
        view = memoryview(body)
        if _crc(queue, seq, count, data_len, view[: 4 * count], view[4 * count :]) != crc:
            yield None
            return
        yield ChunkInfo(queue, seq, count, data_len, offset)
        offset += _HEAD.size + len(body)


def _write_all(fd: int, parts: list[bytes]) -> None:
    views = [memoryview(p) for p in parts if len(p)]
    while views:
        written = os.writev(fd, views)
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]
