"""The broker's check that bytes read for index entries are whole messages of the indexed size."""

from __future__ import annotations

import numpy as np

from broker_stub.store.record import first_bad_row
from staticmq_spark.protocol.rows.encode import encode_columns


def _rows(n: int) -> tuple[bytes, np.ndarray]:
    batch = encode_columns([f"body-{i}".encode() * (1 + i % 3) for i in range(n)], key=[f"k{i}" for i in range(n)])
    return bytes(batch.data), np.asarray(batch.sizes, dtype=np.int32)


def test_whole_messages_pass() -> None:
    data, sizes = _rows(20)
    assert first_bad_row(data, sizes, np.arange(20)) is None


def test_a_row_read_from_the_wrong_place_is_found() -> None:
    data, sizes = _rows(20)
    shifted = data[:100] + data[103:] + b"xyz"  # rows from the one holding byte 100 on are 3 bytes off
    holder = int(np.searchsorted(np.cumsum(sizes), 100, side="right"))  # the row holding byte 100
    assert first_bad_row(shifted, sizes, np.arange(20)) in (holder, holder + 1)
    assert first_bad_row(shifted, sizes, np.arange(holder)) is None, "rows before it are intact"


def test_a_wrong_size_is_found() -> None:
    data, sizes = _rows(5)
    wrong = sizes.copy()
    wrong[2] += 4
    assert first_bad_row(data + b"\0" * 4, wrong, np.arange(5)) == 2
