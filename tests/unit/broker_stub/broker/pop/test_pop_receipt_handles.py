"""Receipt handles: opaque, fixed-width, and every altered byte is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from broker_stub.broker.pop.receipt_handles import HANDLE_SIZE, HandleSigner, load_or_create_secret
from staticmq_spark.errors import DataDirError, ReceiptHandleError

SECRET = bytes(range(32))


def test_signed_handles_verify_as_authentic_with_their_fields() -> None:
    signer = HandleSigner(SECRET)
    blob = signer.sign(42, 1_700_000_000_000, np.array([0, 1, 7], dtype=np.int64))
    assert len(blob) == 3 * HANDLE_SIZE
    batch = signer.verify(blob)
    assert batch.authentic.tolist() == [True, True, True]
    assert batch.ck_ids.tolist() == [42, 42, 42]
    assert batch.indices.tolist() == [0, 1, 7]
    assert batch.deadlines.tolist() == [1_700_000_000_000] * 3


def test_every_single_altered_byte_is_detected() -> None:
    signer = HandleSigner(SECRET)
    handle = signer.sign(7, 123_456, np.array([3], dtype=np.int64))
    for position in range(HANDLE_SIZE):
        for flip in (0x01, 0x80):
            forged = bytearray(handle)
            forged[position] ^= flip
            assert not signer.verify(bytes(forged)).authentic[0], f"byte {position} flipped by {flip:#x}"


def test_handles_of_another_broker_secret_are_not_authentic() -> None:
    blob = HandleSigner(SECRET).sign(1, 99, np.arange(4, dtype=np.int64))
    assert not HandleSigner(b"another broker's secret!!!!!!!!!").verify(blob).authentic.any()


def test_handles_of_several_checkpoints_verify_together() -> None:
    signer = HandleSigner(SECRET)
    blob = signer.sign(1, 100, np.arange(3, dtype=np.int64)) + signer.sign(2, 200, np.arange(2, dtype=np.int64))
    forged = bytearray(blob)
    forged[HANDLE_SIZE * 4 + 16] ^= 1  # the deadline of the last one
    batch = signer.verify(bytes(forged))
    assert batch.authentic.tolist() == [True, True, True, True, False]
    assert batch.ck_ids.tolist() == [1, 1, 1, 2, 2]


def test_a_handle_blob_of_the_wrong_length_is_refused_clearly() -> None:
    with pytest.raises(ReceiptHandleError, match="32 bytes each"):
        HandleSigner(SECRET).verify(b"x" * 33)


def test_the_secret_is_created_once_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "pop" / "secret.key"
    first = load_or_create_secret(path)
    assert len(first) == 32 and load_or_create_secret(path) == first
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_damaged_secret_file_is_a_data_dir_error(tmp_path: Path) -> None:
    path = tmp_path / "secret.key"
    path.write_bytes(b"short")
    with pytest.raises(DataDirError, match="32 bytes"):
        load_or_create_secret(path)
