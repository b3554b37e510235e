"""The commit-log record: one appended batch of one queue, with a CRC over everything after it.

offset size field
0      4    magic             0x534D5131 ("SMQ1")
4      4    total_len         bytes of the whole record, header included
8      4    crc32             of bytes [12, total_len)
12     2    flags             0, FLAG_STAGED or FLAG_LINK (below)
14     2    topic_len
16     4    queue_id          physical queue
20     8    base_offset       queue offset of the first message
28     4    count
32     8    store_timestamp   ms; the same for every message of the record
40     8    topic_uid         the topic incarnation the record belongs to
48     4    attr_len          record attributes (the idempotency key), may be 0
52     ...  topic, attrs, sizes (int32 per message), packed message rows

Besides plain records (flags 0), the sink's write-once commit uses two kinds:
- FLAG_STAGED: rows a sink task staged, written to a staging file in this format; the file
  becomes a commit-log segment as a whole at commit ("adopted"). Such a record belongs to no
  queue by itself: queue_id is the logic queue it was staged for, base_offset the chunk seq.
- FLAG_LINK: makes staged records visible. Its "messages" are LINK_ENTRY rows (physical queue,
  count, base offset, position of the staged record): recovery re-dispatches consume-queue
  entries from them exactly as from a plain record. attrs is the commit's idempotency key.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from staticmq_spark.protocol.rows.codec import FLAG_KEY, FLAG_TAGS, KNOWN_FLAGS, Int32Array
from staticmq_spark.protocol.rows.codec import HEADER_DTYPE as ROW_HEADER
from staticmq_spark.protocol.rows.codec import HEADER_SIZE as ROW_HEADER_SIZE

MAGIC = 0x534D5131
HEADER = struct.Struct("<IIIHHiqiqQI")
HEADER_SIZE = HEADER.size  # 52
MAX_ATTR_LEN = 1024
FLAG_STAGED = 1
FLAG_LINK = 2
_FLAGS = (0, FLAG_STAGED, FLAG_LINK)
LINK_ENTRY = np.dtype([("queue", "<i4"), ("count", "<i4"), ("base", "<i8"), ("record_pos", "<i8")])


@dataclass(frozen=True, slots=True)
class RecordHeader:
    total_len: int
    crc: int
    topic: str
    queue_id: int
    base_offset: int
    count: int
    store_timestamp: int
    topic_uid: int
    attrs: bytes
    flags: int = 0

    @property
    def rows_offset(self) -> int:
        """Where the message rows start, relative to the record start."""
        return HEADER_SIZE + len(self.topic.encode()) + len(self.attrs) + 4 * self.count


def encode_record(
    *,
    topic: str,
    queue_id: int,
    base_offset: int,
    store_timestamp: int,
    topic_uid: int,
    attrs: bytes,
    sizes: Int32Array,
    data: bytes | memoryview,
    flags: int = 0,
) -> list[bytes | memoryview]:
    """The record as parts for os.writev (no copy of the message data)."""
    topic_b = topic.encode()
    sizes_b = sizes.astype("<i4", copy=False).tobytes()
    count = int(sizes.shape[0])
    total = HEADER_SIZE + len(topic_b) + len(attrs) + len(sizes_b) + len(data)
    head_rest = struct.pack(
        "<HHiqiqQI", flags, len(topic_b), queue_id, base_offset, count, store_timestamp, topic_uid, len(attrs)
    )
    crc = zlib.crc32(head_rest)
    crc = zlib.crc32(topic_b, crc)
    crc = zlib.crc32(attrs, crc)
    crc = zlib.crc32(sizes_b, crc)
    crc = zlib.crc32(data, crc)
    head = struct.pack("<III", MAGIC, total, crc) + head_rest
    return [head, topic_b, attrs, sizes_b, data]


class RecordError(ValueError):
    """A record that is torn or corrupt: recovery cuts the log here."""


def decode_header(head: bytes, available: int) -> tuple[int, int, int, int, int, int, int, int, int, int]:
    """Check the fixed header; `available` is how many bytes the segment has from here. Returns
    total, crc, topic_len, queue_id, base, count, timestamp, topic uid, attr_len, flags."""
    if len(head) < HEADER_SIZE:
        raise RecordError("short header")
    magic, total, crc, flags, topic_len, queue_id, base, count, ts, uid, attr_len = HEADER.unpack_from(head)
    if magic != MAGIC:
        raise RecordError(f"bad magic {magic:#x}")
    if flags not in _FLAGS or count <= 0 or attr_len > MAX_ATTR_LEN or base < 0:
        raise RecordError("bad header fields")
    minimum = HEADER_SIZE + topic_len + attr_len + 4 * count
    if total < minimum or total > available:
        raise RecordError(f"record length {total} does not fit")
    return total, crc, topic_len, queue_id, base, count, ts, uid, attr_len, flags


def parse_record(record: bytes) -> tuple[RecordHeader, Int32Array]:
    """Fully check one record (CRC and sizes); returns its header and message sizes."""
    total, crc, topic_len, queue_id, base, count, ts, uid, attr_len, flags = decode_header(record, len(record))
    if total != len(record):
        raise RecordError("record length mismatch")
    if zlib.crc32(memoryview(record)[12:]) != crc:
        raise RecordError("crc mismatch")
    p = HEADER_SIZE
    topic = bytes(record[p : p + topic_len]).decode()
    p += topic_len
    attrs = bytes(record[p : p + attr_len])
    p += attr_len
    sizes = np.frombuffer(record, dtype="<i4", count=count, offset=p).astype(np.int32)
    p += 4 * count
    if int(sizes.min()) <= 0 or int(sizes.sum(dtype=np.int64)) != total - p:
        raise RecordError("message sizes do not add up")
    header = RecordHeader(total, crc, topic, queue_id, base, count, ts, uid, attrs, flags)
    return header, sizes


def encode_link(entries: np.ndarray) -> tuple[Int32Array, bytes]:
    """A link record's sizes and rows for its LINK_ENTRY entries."""
    entries = np.ascontiguousarray(entries, dtype=LINK_ENTRY)
    return np.full(len(entries), LINK_ENTRY.itemsize, dtype=np.int32), entries.tobytes()


def decode_link(record: bytes | memoryview, header: RecordHeader) -> np.ndarray:
    """The LINK_ENTRY entries of a link record (whole record bytes)."""
    start = header.rows_offset
    return np.frombuffer(record, dtype=LINK_ENTRY, count=header.count, offset=start)


class MisalignedRead(Exception):
    """Bytes read for an index entry are not the message it names (row `row` of the read)."""

    def __init__(self, row: int) -> None:
        super().__init__(f"row {row} of the read is not a message")
        self.row = row


def first_bad_row(data: bytes, sizes: Int32Array, rows: np.ndarray) -> int | None:
    """The first of `rows` (indexes into the packed rows `data`, `sizes` bytes each) whose row
    header does not describe a message of its size: an index entry pointing at the wrong bytes."""
    ends = np.cumsum(sizes, dtype=np.int64)
    starts = ends - sizes
    size = sizes[rows].astype(np.int64)
    bad = size < ROW_HEADER_SIZE
    ok = np.flatnonzero(~bad)
    if ok.size:
        buf = np.frombuffer(data, dtype=np.uint8)
        heads = buf[starts[rows[ok]][:, None] + np.arange(ROW_HEADER_SIZE)].view(ROW_HEADER).reshape(-1)
        lens = [heads[f].astype(np.int64) for f in ("key_len", "tags_len", "body_len", "props_len")]
        wrong = (heads["flags"] & ~np.uint32(KNOWN_FLAGS)) != 0
        for length in lens:
            wrong |= length < 0
        wrong |= ((heads["flags"] & FLAG_KEY) == 0) & (lens[0] != 0)
        wrong |= ((heads["flags"] & FLAG_TAGS) == 0) & (lens[1] != 0)
        wrong |= ROW_HEADER_SIZE + lens[0] + lens[1] + lens[2] + lens[3] != size[ok]
        bad[ok] = wrong
    hit = np.flatnonzero(bad)
    return int(rows[hit[0]]) if hit.size else None
