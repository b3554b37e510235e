"""Receipt handles: opaque, tamper-evident tokens that name one popped message of one checkpoint.

Layout of a handle (HANDLE_SIZE = 32 bytes, little-endian):

    offset size field
    0      1    version       1
    1      3    reserved      0
    4      4    index         the message's position in its checkpoint (CK)
    8      8    ck_id         the checkpoint: the offset of its CK row in the revive log
    16     8    deadline_ms   pop time + invisible time, broker clock
    24     8    tag

    (a, b) = BLAKE2b-128(key = broker secret, ck_id | deadline_ms)     one keyed hash per CK
    tag    = a + (index + 1) * (b | 1)  mod 2**64

Altering ck_id or deadline_ms changes (a, b), which only the broker can compute; altering the
index or the tag breaks the equation; the version and reserved bytes must be exact. So every
altered byte is detected. A holder of several handles of one CK could solve for (a, b) and
build the handle of another index of that same CK - but every in-range index of a CK was handed
to that same holder in the same pop, and out-of-range indices are refused by the table.
One hash per CK instead of one MAC per message keeps signing and checking vectorized.

The secret is per broker, created once in its data directory, so handles survive a restart.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from broker_stub.store.atomic_file import atomic_write_bytes
from staticmq_spark.errors import DataDirError, ReceiptHandleError

HANDLE_VERSION = 1
HANDLE_DTYPE = np.dtype(
    [
        ("version", "u1"),
        ("reserved", "u1", (3,)),
        ("index", "<u4"),
        ("ck_id", "<i8"),
        ("deadline_ms", "<i8"),
        ("tag", "<u8"),
    ]
)
HANDLE_SIZE = HANDLE_DTYPE.itemsize  # 32
SECRET_BYTES = 32
_KEY_INPUT = struct.Struct("<qq")


@dataclass(frozen=True, slots=True)
class HandleBatch:
    """Parsed handles; `authentic[i]` says whether handle i was issued by this broker unaltered."""

    ck_ids: npt.NDArray[np.int64]
    indices: npt.NDArray[np.int64]
    deadlines: npt.NDArray[np.int64]
    authentic: npt.NDArray[np.bool_]

    @property
    def count(self) -> int:
        return int(self.ck_ids.shape[0])


class HandleSigner:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("a receipt-handle secret needs at least 16 bytes")
        self._secret = secret

    def _key(self, ck_id: int, deadline_ms: int) -> tuple[int, int]:
        digest = hashlib.blake2b(_KEY_INPUT.pack(ck_id, deadline_ms), key=self._secret, digest_size=16).digest()
        a, b = struct.unpack("<QQ", digest)
        return a, b | 1

    def sign(self, ck_id: int, deadline_ms: int, indices: npt.NDArray[np.int64]) -> bytes:
        """The handles of messages `indices` of checkpoint `ck_id`, concatenated."""
        a, b = self._key(ck_id, deadline_ms)
        out = np.zeros(indices.shape[0], dtype=HANDLE_DTYPE)
        out["version"] = HANDLE_VERSION
        out["index"] = indices
        out["ck_id"] = ck_id
        out["deadline_ms"] = deadline_ms
        out["tag"] = _tags(np.uint64(a), np.uint64(b), indices)
        return out.tobytes()

    def verify(self, blob: bytes) -> HandleBatch:
        """Parse concatenated handles and check each one (vectorized; one hash per distinct CK)."""
        raw = parse_handles(blob)
        n = raw.shape[0]
        ck_ids = raw["ck_id"].astype(np.int64)
        deadlines = raw["deadline_ms"].astype(np.int64)
        indices = raw["index"].astype(np.int64)
        well_formed = (raw["version"] == HANDLE_VERSION) & ~raw["reserved"].any(axis=1)
        expected = np.zeros(n, dtype=np.uint64)
        if n and bool((ck_ids == ck_ids[0]).all()):  # the usual batch ack: one CK
            a, b = self._key(int(ck_ids[0]), int(deadlines[0]))
            expected = _tags(np.uint64(a), np.uint64(b), indices)
            odd = np.flatnonzero(deadlines != deadlines[0])
        elif n:
            unique, first, inverse = np.unique(ck_ids, return_index=True, return_inverse=True)
            keys = np.array(
                [self._key(int(c), int(deadlines[i])) for c, i in zip(unique, first, strict=True)], dtype=np.uint64
            ).reshape(-1, 2)
            expected = _tags(keys[inverse, 0], keys[inverse, 1], indices)
            odd = np.flatnonzero(deadlines != deadlines[first][inverse])
        else:
            odd = np.zeros(0, dtype=np.int64)
        for i in odd.tolist():  # a CK has one deadline: a different one is forged, but check it exactly
            a, b = self._key(int(ck_ids[i]), int(deadlines[i]))
            expected[i] = _tags(np.uint64(a), np.uint64(b), indices[i : i + 1])[0]
        authentic = well_formed & (expected == raw["tag"])
        return HandleBatch(ck_ids, indices, deadlines, authentic)


def _tags(
    a: np.uint64 | npt.NDArray[np.uint64], b: np.uint64 | npt.NDArray[np.uint64], indices: npt.NDArray[np.int64]
) -> npt.NDArray[np.uint64]:
    with np.errstate(over="ignore"):
        return np.asarray(a + (indices.astype(np.uint64) + np.uint64(1)) * b, dtype=np.uint64)


def parse_handles(blob: bytes) -> npt.NDArray[np.void]:
    if len(blob) % HANDLE_SIZE:
        raise ReceiptHandleError(
            f"receipt handles must be {HANDLE_SIZE} bytes each; got {len(blob)} bytes "
            "(not a handle this broker issued, or truncated)"
        )
    return np.frombuffer(blob, dtype=HANDLE_DTYPE)


def load_or_create_secret(path: Path) -> bytes:
    """The broker's handle secret: read it, or create it once (0600) when the file is absent."""
    try:
        secret = path.read_bytes()
    except FileNotFoundError:
        secret = secrets.token_bytes(SECRET_BYTES)
        atomic_write_bytes(path, secret)
        os.chmod(path, 0o600)
        return secret
    if len(secret) != SECRET_BYTES:
        raise DataDirError(f"{path} holds {len(secret)} bytes; a receipt-handle secret is {SECRET_BYTES} bytes")
    return secret
