"""DirectWriter: large staged records skip the page cache, and the file reads exactly as if
written plainly."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Any

import pytest

from broker_stub.store.direct_write import BLOCK, DIRECT_MIN_BYTES, DirectWriter


def _payload(n: int, seed: int) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(n))


@pytest.fixture
def direct_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Byte counts written through O_DIRECT descriptors."""
    seen: list[int] = []
    real = os.pwrite

    def pwrite(fd: int, data: Any, offset: int) -> int:
        n = real(fd, data, offset)
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            assert offset % BLOCK == 0 and n % BLOCK == 0
            seen.append(n)
        return n

    monkeypatch.setattr(os, "pwrite", pwrite)
    return seen


def _refuses_direct_io(tmp_path: Path) -> bool:
    try:
        os.close(os.open(tmp_path / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644))
    except OSError:
        return True
    return False


def test_large_writes_at_unaligned_offsets_read_back_exactly(tmp_path: Path, direct_writes: list[int]) -> None:
    if _refuses_direct_io(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    path = tmp_path / "staging"
    writer = DirectWriter()
    expected = b""
    for n, sizes in enumerate([(52, 4000, DIRECT_MIN_BYTES + 123), (7, DIRECT_MIN_BYTES * 2), (BLOCK * 10, 1)]):
        parts = [_payload(size, n) for size in sizes]
        writer.write(path, len(expected), parts)
        expected += b"".join(parts)
    assert path.read_bytes() == expected
    assert writer.enabled
    assert len(direct_writes) == 2  # the third write's aligned middle is under DIRECT_MIN_BYTES
    assert sum(direct_writes) > 3 * DIRECT_MIN_BYTES - 2 * BLOCK


def test_small_writes_go_through_the_page_cache(tmp_path: Path, direct_writes: list[int]) -> None:
    path = tmp_path / "staging"
    DirectWriter().write(path, 0, [b"head", memoryview(_payload(1000, 1))])
    assert path.read_bytes() == b"head" + _payload(1000, 1)
    assert direct_writes == []


def test_a_file_system_refusing_direct_io_gets_plain_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, direct_writes: list[int]
) -> None:
    real = os.open

    def refusing_open(path: Any, flags: int, mode: int = 0o777) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(path, flags, mode)

    monkeypatch.setattr(os, "open", refusing_open)
    path = tmp_path / "staging"
    writer = DirectWriter()
    data = _payload(DIRECT_MIN_BYTES * 3, 2)
    writer.write(path, 0, [b"x" * 100, data])
    writer.write(path, 100 + len(data), [data])
    assert path.read_bytes() == b"x" * 100 + data + data
    assert not writer.enabled
    assert direct_writes == []


def test_direct_io_can_be_turned_off(tmp_path: Path, direct_writes: list[int]) -> None:
    path = tmp_path / "staging"
    data = _payload(DIRECT_MIN_BYTES * 2, 3)
    DirectWriter(enabled=False).write(path, 0, [data])
    assert path.read_bytes() == data
    assert direct_writes == []
