"""Staged sink writes and their transaction records (the broker half of the sink's two-phase
commit). Layout under <data>/sink/:

    staging/<writer>/<batch>/<staging id>   chunks a task staged here (not yet visible)
    txn/<writer>/<batch>.plan               how the commit appends them (written at prepare)
    txn/<writer>/<batch>.bin                the commit decision (TxnDecision), then "committed"
    txn/<writer>/<batch>.adopt              where the commit moved its staging files, if it did

A staging file is a sequence of commit-log records (broker_stub/store/record.py) flagged
FLAG_STAGED, one per chunk: queue_id is the logic queue, base_offset the chunk's seq. So a
staging file can become a commit-log segment as it is (the write-once commit: the message store
adopts it by rename and links its records into their queues). A torn tail (a write the broker
died in, never acknowledged) is cut before the file is written again. Large chunks are written
mostly past the page cache (direct_write.py, store.sink_direct_io): they are fsynced at prepare
and usually not read before they are consumed.

While the broker runs, it keeps an index of each staging file it wrote itself from empty (or
read to its end), every write of which succeeded: the index then says exactly what reading the
file would, so prepare need not read the rows. Any other file is read. Once a transaction's
decision is stored, its staging files take no more chunks.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from broker_stub.store.atomic_file import atomic_write_bytes, fsync_path
from broker_stub.store.direct_write import DirectWriter
from broker_stub.store.record import FLAG_STAGED, HEADER_SIZE, RecordError, decode_header, encode_record, parse_record
from staticmq_spark.errors import ConflictError, DataLossError, InvalidArgumentError
from staticmq_spark.protocol.rows.codec import Int32Array, PackedBatch

_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
KEEP_TXNS_PER_WRITER = 200


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """Where a staged chunk's record is in its file, and what it holds."""

    topic: str
    queue: int
    seq: int
    count: int
    data_len: int
    offset: int  # of its record
    rows_offset: int  # of its rows, from the record start
    sizes: Int32Array = field(compare=False, repr=False)

    @property
    def record_len(self) -> int:
        return self.rows_offset + self.data_len


def _checked(name: str, what: str) -> str:
    if not name or len(name) > 128 or not set(name) <= _NAME_OK:
        raise InvalidArgumentError(f"{what} {name!r} must be 1-128 letters, digits, '-' or '_'")
    return name


class SinkStaging:
    def __init__(self, root: Path, direct_io: bool = True) -> None:
        self._staging = root / "staging"
        self._writer = DirectWriter(direct_io)  # used under `lock`
        self._txn = root / "txn"
        self.lock = threading.Lock()  # held by stage() writes, and by whoever moves staging files
        self._seqs: dict[Path, set[int]] = {}
        self._known: dict[Path, dict[int, ChunkInfo]] = {}  # files whose index is exact (see above)

    # ------------------------------------------------------------------ staging

    def staging_path(self, writer: str, batch: int, staging_id: str) -> Path:
        return self._staging / _checked(writer, "writer") / str(batch) / _checked(staging_id, "staging id")

    def stage(
        self, writer: str, batch: int, staging_id: str, queue: int, seq: int, rows: PackedBatch, *, topic: str, uid: int
    ) -> None:
        """Append one chunk; the same (staging id, seq) staged again is ignored."""
        path = self.staging_path(writer, batch, staging_id)
        parts = encode_record(
            topic=topic,
            queue_id=queue,
            base_offset=seq,
            store_timestamp=int(time.time() * 1000),
            topic_uid=uid,
            attrs=b"",
            sizes=rows.sizes,
            data=rows.data,
            flags=FLAG_STAGED,
        )
        with self.lock:
            if self._txn_file(writer, batch).exists():
                raise ConflictError(
                    f"transaction {writer}/{batch} is already prepared on this broker: it takes no more rows"
                )
            seqs = self._seqs.get(path)
            if seqs is None:
                infos, end = scan_staged(path)
                if end is not None:  # a torn tail: cut it, the rest is whole
                    os.truncate(path, end)
                seqs = set(infos)
                self._seqs[path] = seqs
                self._known[path] = infos
            if seq in seqs:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            known = self._known.pop(path, None)  # back only once this write is whole
            offset = path.stat().st_size if path.exists() else 0
            self._writer.write(path, offset, parts)
            seqs.add(seq)
            if known is not None:
                rows_offset = sum(len(p) for p in parts[:4])
                known[seq] = ChunkInfo(topic, queue, seq, rows.count, len(rows.data), offset, rows_offset, rows.sizes)
                self._known[path] = known

    def index(self, writer: str, batch: int, staging_id: str) -> dict[int, ChunkInfo]:
        """The readable chunks of a staging id, by seq."""
        path = self.staging_path(writer, batch, staging_id)
        with self.lock:
            known = self._known.get(path)
            if known is not None:
                return dict(known)
        return scan_staged(path)[0]

    def make_durable(self, writer: str, batch: int, staging_id: str) -> None:
        path = self.staging_path(writer, batch, staging_id)
        if path.exists():
            fsync_path(path)
            fsync_path(path.parent)

    def forget(self, path: Path) -> None:
        """`path` was moved away (adopted by the commit log). Caller holds `lock`."""
        self._seqs.pop(path, None)
        self._known.pop(path, None)

    def drop_batches_up_to(self, writer: str, batch: int) -> None:
        """Staging of batches <= `batch` will never be committed any more: delete it."""
        root = self._staging / _checked(writer, "writer")
        if not root.exists():
            return
        for entry in root.iterdir():
            if entry.name.isdigit() and int(entry.name) <= batch:
                with self.lock:
                    for cache in (self._seqs, self._known):
                        for path in [p for p in cache if p.parent == entry]:
                            del cache[path]
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

    def record_adoption(self, writer: str, batch: int, bases: dict[str, int]) -> None:
        """Where the commit is about to move staging files in the commit log (staging id ->
        position), written durably before it moves any."""
        atomic_write_bytes(self._txn_file(writer, batch, ".adopt"), json.dumps(bases, sort_keys=True).encode())

    def adoption(self, writer: str, batch: int) -> dict[str, int]:
        try:
            raw = self._txn_file(writer, batch, ".adopt").read_bytes()
        except FileNotFoundError:
            return {}
        return {str(k): int(v) for k, v in json.loads(raw).items()}

    def forget_old_txns(self, writer: str, newest: int) -> None:
        root = self._txn / _checked(writer, "writer")
        for pattern in ("*.bin", "*.plan", "*.adopt"):
            for path in root.glob(pattern):
                if path.stem.isdigit() and int(path.stem) < newest - KEEP_TXNS_PER_WRITER:
                    path.unlink(missing_ok=True)


def scan_staged(path: Path) -> tuple[dict[int, ChunkInfo], int | None]:
    """The staged chunks of a file (a staging file, or one the commit log adopted), each record
    checked, up to the first torn or damaged record or one that is not staged; and where that
    record starts, or None if the file ends with a whole staged record."""
    infos: dict[int, ChunkInfo] = {}
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return infos, None
    with fh:
        size = os.fstat(fh.fileno()).st_size
        offset = 0
        for info in _records(fh, size):
            if info is None:
                break
            infos.setdefault(info.seq, info)
            offset = info.offset + info.record_len
        else:
            return infos, None
    return infos, offset


def _records(fh: BinaryIO, size: int) -> Iterator[ChunkInfo | None]:
    """The records of a file in order, each checked; None for a torn, damaged or not staged one
    (and nothing after it)."""
    offset = 0
    while offset < size:
        head = fh.read(HEADER_SIZE)
        try:
            total, _crc, _tl, _q, _b, _c, _ts, _uid, _al, flags = decode_header(head, size - offset)
            if flags != FLAG_STAGED:
                raise RecordError("not a staged record")
            record = head + fh.read(total - HEADER_SIZE)
            header, sizes = parse_record(record)
        except RecordError:
            yield None
            return
        yield ChunkInfo(
            header.topic,
            header.queue_id,
            header.base_offset,
            header.count,
            total - header.rows_offset,
            offset,
            header.rows_offset,
            sizes,
        )
        offset += total


def read_chunk(path: Path, info: ChunkInfo) -> PackedBatch:
    """The rows of one chunk of `scan_staged(path)` / `index()`, checked against their CRC."""
    try:
        with path.open("rb") as fh:
            fh.seek(info.offset)
            record = fh.read(info.record_len)
        header, sizes = parse_record(record)
    except (OSError, RecordError):
        raise DataLossError(f"staged chunk {info.seq} of {path} is damaged or missing") from None
    if (header.queue_id, header.base_offset, header.count) != (info.queue, info.seq, info.count):
        raise DataLossError(f"staged chunk {info.seq} of {path} is not the record indexed there")
    return PackedBatch(record[header.rows_offset :], sizes)
