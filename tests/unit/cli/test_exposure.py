"""No silent exposure: a non-loopback bind needs --insecure and is always logged."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from staticmq_spark.cli.exposure import check_exposure, is_loopback
from staticmq_spark.errors import InvalidOptionError


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.5", "localhost", "::1", "[::1]"])
def test_loopback_hosts_need_nothing(host: str, caplog: pytest.LogCaptureFixture) -> None:
    assert is_loopback(host)
    check_exposure(host, insecure=False, what="broker")
    assert not caplog.records


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "broker.example"])
def test_non_loopback_host_is_refused_without_insecure(host: str) -> None:
    with pytest.raises(InvalidOptionError, match=rf"--host {host} would expose the broker .* pass --insecure"):
        check_exposure(host, insecure=False, what="broker")


def test_non_loopback_host_with_insecure_is_logged_as_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="staticmq.cli"):
        check_exposure("0.0.0.0", insecure=True, what="name server")
    assert any("without authentication (--insecure)" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "command", [["namesrv"], ["broker", "--name", "broker-0", "-n", "127.0.0.1:1", "--data-dir", "x"]]
)
def test_server_commands_refuse_a_wildcard_bind_before_serving(command: list[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run(
        [sys.executable, "-m", "staticmq_spark.cli", *command, "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert out.returncode != 0
    assert "pass --insecure" in out.stderr
    assert not (tmp_path / "x").exists(), "nothing was created before the refusal"
