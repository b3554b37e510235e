"""Every argument of every `staticmq` subcommand has help text, and `-n` defaults to NAMESRV_ADDR."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from staticmq_spark.cli.formatting import camel_keys, readable_ms
from staticmq_spark.cli.main import build_parser


def walk(parser: argparse.ArgumentParser, path: str = "staticmq") -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, f"{path} {name}")
        else:
            yield path, action


def test_every_argument_of_every_subcommand_has_help() -> None:
    actions = list(walk(build_parser()))
    assert len({p for p, _ in actions}) > 15  # the admin commands are walked too
    missing = [f"{p}: {a.option_strings or a.dest}" for p, a in actions if not a.help]
    assert missing == []


def test_every_subcommand_has_help_in_its_parent_listing() -> None:
    def subactions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                yield from action._choices_actions
                for sub in action.choices.values():
                    yield from subactions(sub)

    assert [a.dest for a in subactions(build_parser()) if not a.help] == []


def test_namesrv_defaults_to_the_namesrv_addr_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876;10.0.0.2:9876")
    parser = build_parser()
    for argv in (["admin", "clusterList"], ["pull", "-t", "t"], ["send", "-t", "t", "x"], ["broker", "--name", "b"]):
        args = parser.parse_args([*argv, "--data-dir", "/tmp/x"] if argv[0] == "broker" else argv)
        assert args.namesrv == "10.0.0.1:9876;10.0.0.2:9876", argv
    assert build_parser().parse_args(["admin", "clusterList", "-n", "h:1"]).namesrv == "h:1"


def test_without_namesrv_addr_the_name_server_is_required(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["admin", "clusterList"])
    assert "-n/--namesrv" in capsys.readouterr().err


def test_json_keys_are_camel_case_and_times_readable() -> None:
    assert camel_keys({"queue_id": 1, "rows": [{"last_store_timestamp": 2}]}) == {
        "queueId": 1,
        "rows": [{"lastStoreTimestamp": 2}],
    }
    assert readable_ms(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"
    assert readable_ms(0) is None
