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
    root = Path(__file__).resolve().parents[3] / "conf"
    for path in sorted(root.glob("*.toml")):
        data = load_toml(path)
        store = store_config_from(data.get("store", {}))
        if "broker" in data:
            broker_config_from({"name": "b", "namesrv": "x:1", "data_dir": tmp_path, **data["broker"]}, store)


def test_store_settings_from_the_command_line_are_typed() -> None:
    from staticmq_spark.cli.server_cmds import parse_sets

    sets = parse_sets(["sink_direct_io=False", "segment_bytes=1048576", "retention_hours=1.5", "flush=async"])
    assert sets == {"sink_direct_io": False, "segment_bytes": 1048576, "retention_hours": 1.5, "flush": "async"}
    assert parse_sets(["sink_direct_io=true"]) == {"sink_direct_io": True}
    assert StoreConfig(**parse_sets(["sink_direct_io=false"])).sink_direct_io is False


@pytest.mark.parametrize("pair", ["sink_direct_io=yes please", "segment_bytes=lots"])
def test_a_bad_command_line_store_setting_is_named(pair: str) -> None:
    from staticmq_spark.cli.server_cmds import parse_sets

    with pytest.raises(InvalidOptionError, match=pair.split("=", maxsplit=1)[0]):
        parse_sets([pair])


def test_sink_direct_io_must_be_a_boolean() -> None:
    with pytest.raises(InvalidOptionError, match="sink_direct_io must be true or false"):
        store_config_from({"sink_direct_io": "sometimes"})


def test_conf_files_list_every_setting_and_load() -> None:
    """conf/broker.toml documents every [broker] and [store] key with its default; the example ACL loads."""
    import dataclasses
    from pathlib import Path

    from broker_stub.config import BrokerConfig, StoreConfig, load_toml
    from staticmq_spark.protocol.security.acl import load_acl

    conf = Path(__file__).resolve().parents[3] / "conf"
    data = load_toml(conf / "broker.toml")
    given = set(data["broker"]) | {"name", "namesrv", "data_dir", "host", "port", "metrics_port", "store"}
    assert {f.name for f in dataclasses.fields(BrokerConfig)} <= given
    assert {f.name for f in dataclasses.fields(StoreConfig)} == set(data["store"])
    assert load_acl(conf / "acl.example.yml").first_admin() is not None
