"""Configuration: unknown keys and bad values fail at once, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_stub.config import StoreConfig, broker_config_from, load_toml, store_config_from
from staticmq_spark.errors import InvalidOptionError


def test_unknown_store_key_is_named() -> None:
    with pytest.raises(InvalidOptionError, match="segmnet_bytes"):
        store_config_from({"segmnet_bytes": 1})


def test_bad_flush_policy_names_the_accepted_values() -> None:
    with pytest.raises(InvalidOptionError, match="sync"):
        StoreConfig(flush="sometimes")


def test_batch_limit_must_fit_a_segment() -> None:
    with pytest.raises(InvalidOptionError, match="max_batch_bytes"):
        StoreConfig(segment_bytes=1000, max_batch_bytes=2000)


def test_toml_sections_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text("[brokr]\nname='x'\n")
    with pytest.raises(InvalidOptionError, match="brokr"):
        load_toml(path)


def test_example_config_files_load(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2] / "conf"
    for path in sorted(root.glob("*.toml")):
        data = load_toml(path)
        store = store_config_from(data.get("store", {}))
        if "broker" in data:
            broker_config_from({"name": "b", "namesrv": "x:1", "data_dir": tmp_path, **data["broker"]}, store)
