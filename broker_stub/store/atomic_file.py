"""File writing of the store: crash-safe whole-file writes (write a temp file, fsync it, rename it
over, fsync the folder), and writing all of a record's parts at an offset."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_path(path.parent)


def atomic_write_json(path: Path, value: Any) -> None:
    atomic_write_bytes(path, json.dumps(value, indent=1, sort_keys=True).encode())


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when the file does not exist."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    return json.loads(raw)


def fsync_path(path: Path) -> None:
    """fsync a file or a directory (its entries: a rename or create in it) by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pwrite_all(fd: int, parts: Sequence[bytes | bytearray | memoryview], offset: int) -> None:
    """Write the concatenation of `parts` at `offset`, however many calls it takes."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        written = os.pwritev(fd, views, offset)
        offset += written
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if views and written:
            views[0] = views[0][written:]
