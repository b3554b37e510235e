"""Staged sink writes and their transaction records (the broker half of the sink's two-phase
commit). Layout under <data>/sink/:

    staging/<writer>/<batch>/<staging id>   chunks a task staged here (not yet visible)
    txn/<writer>/<batch>.bin                the commit decision (TxnDecision), then "committed"

A chunk file is a sequence of records [magic, crc, queue, seq, count, data_len][sizes][rows]; a
torn tail is ignored (its chunk was never acknowledged as durable: prepare fsyncs first).
"""

from __future__ import annotations

import os
import shutil
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from broker_stub.store.atomic_file import atomic_write_bytes, fsync_dir
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.codec import PackedBatch

_HEAD = struct.Struct("<IIiiiI")
_MAGIC = 0x534D5354  # "SMST"
_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
KEEP_TXNS_PER_WRITER = 200


@dataclass(frozen=True, slots=True)
class Chunk:
    queue: int
    seq: int
    batch: PackedBatch


def _checked(name: str, what: str) -> str:
    if not name or len(name) > 128 or not set(name) <= _NAME_OK:
        raise InvalidArgumentError(f"{what} {name!r} must be 1-128 letters, digits, '-' or '_'")
    return name


class SinkStaging:
    def __init__(self, root: Path) -> None:
        self._staging = root / "staging"
        self._txn = root / "txn"
        self._lock = threading.Lock()
        self._seqs: dict[Path, set[int]] = {}

    # ------------------------------------------------------------------ staging

    def _file(self, writer: str, batch: int, staging_id: str) -> Path:
        return self._staging / _checked(writer, "writer") / str(batch) / _checked(staging_id, "staging id")

    def stage(self, writer: str, batch: int, staging_id: str, queue: int, seq: int, rows: PackedBatch) -> None:
        """Append one chunk; the same (staging id, seq) staged again is ignored."""
        path = self._file(writer, batch, staging_id)
        sizes = rows.sizes_bytes()
        body = struct.pack("<iiiI", queue, seq, rows.count, len(rows.data)) + sizes + rows.data
        record = _HEAD.pack(_MAGIC, zlib.crc32(body), queue, seq, rows.count, len(rows.data)) + sizes + rows.data
        with self._lock:
            seqs = self._seqs.get(path)
            if seqs is None:
                seqs = {c.seq for c in self._read(path)}
                self._seqs[path] = seqs
            if seq in seqs:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("ab") as fh:
                fh.write(record)
            seqs.add(seq)

    def chunks(self, writer: str, batch: int, staging_id: str) -> list[Chunk]:
        return sorted(self._read(self._file(writer, batch, staging_id)), key=lambda c: c.seq)

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
    def _read(path: Path) -> Iterator[Chunk]:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return
        p = 0
        while p + _HEAD.size <= len(raw):
            magic, crc, queue, seq, count, data_len = _HEAD.unpack_from(raw, p)
            end = p + _HEAD.size + 4 * count + data_len
            if magic != _MAGIC or count <= 0 or end > len(raw):
                return
            body = struct.pack("<iiiI", queue, seq, count, data_len) + raw[p + _HEAD.size : end]
            if zlib.crc32(body) != crc:
                return
            sizes = np.frombuffer(raw, dtype="<i4", count=count, offset=p + _HEAD.size).astype(np.int32)
            data = raw[p + _HEAD.size + 4 * count : end]
            yield Chunk(queue, seq, PackedBatch(data, sizes))
            p = end

    def drop_batches_up_to(self, writer: str, batch: int) -> None:
        """Staging of batches <= `batch` will never be committed any more: delete it."""
        root = self._staging / _checked(writer, "writer")
        if not root.exists():
            return
        for entry in root.iterdir():
            if entry.name.isdigit() and int(entry.name) <= batch:
                with self._lock:
                    for path in list(self._seqs):
                        if path.parent == entry:
                            del self._seqs[path]
                shutil.rmtree(entry, ignore_errors=True)

    # ------------------------------------------------------------------ transaction records

    def _txn_file(self, writer: str, batch: int) -> Path:
        return self._txn / _checked(writer, "writer") / f"{batch}.bin"

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

    def forget_old_txns(self, writer: str, newest: int) -> None:
        root = self._txn / _checked(writer, "writer")
        for path in root.glob("*.bin"):
            if path.stem.isdigit() and int(path.stem) < newest - KEEP_TXNS_PER_WRITER:
                path.unlink(missing_ok=True)
