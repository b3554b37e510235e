"""Data directory ownership: a directory belongs to one broker name, and says so."""

from __future__ import annotations

import time
from pathlib import Path

from broker_stub.store.atomic_file import atomic_write_json, read_json
from staticmq_spark.errors import DataDirError

IDENTITY_FILE = "broker.json"


def claim_data_dir(data_dir: Path, broker_name: str) -> None:
    """Create or check `data_dir` for `broker_name`; refuse a directory of another broker."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / IDENTITY_FILE
    try:
        found = read_json(path)
    except ValueError as exc:
        raise DataDirError(f"{path} is not valid JSON ({exc}); refusing to use {data_dir}") from None
    if found is None:
        if any(p.name != IDENTITY_FILE for p in data_dir.iterdir()):
            raise DataDirError(
                f"{data_dir} is not empty and has no {IDENTITY_FILE}: it is not a staticmq broker "
                "data directory; refusing to use it"
            )
        atomic_write_json(path, {"broker": broker_name, "created": int(time.time() * 1000)})
        return
    owner = found.get("broker") if isinstance(found, dict) else None
    if owner != broker_name:
        raise DataDirError(
            f"{data_dir} belongs to broker {owner!r}, not {broker_name!r}; "
            "start that broker on it, or give this one its own directory"
        )
