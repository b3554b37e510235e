"""Name-server address lists, parsed once: `host:port[;host:port]` (staticmq), `rocketmq://…`, or
`memory://NAME` (an in-memory cluster of this process, for tests)."""

from __future__ import annotations

from dataclasses import dataclass

from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.protocol.topics.names import split_addresses

SCHEMES = ("staticmq", "rocketmq", "memory")  # memory: the in-memory test backend (memory://NAME)


@dataclass(frozen=True, slots=True)
class ClusterAddress:
    scheme: str  # "staticmq" (broker_stub's gRPC) or "rocketmq" (Apache RocketMQ remoting)
    hosts: tuple[str, ...]

    def __str__(self) -> str:
        hosts = ";".join(self.hosts)
        return hosts if self.scheme == "staticmq" else f"{self.scheme}://{hosts}"


def parse_address(text: str) -> ClusterAddress:
    """`a:1;b:2` -> staticmq; `rocketmq://a:1;b:2` -> RocketMQ; commas separate hosts too."""
    raw = (text or "").strip()
    scheme = "staticmq"
    if "://" in raw:
        scheme, _, raw = raw.partition("://")
        scheme = scheme.lower()
        if scheme not in SCHEMES:
            raise InvalidOptionError(
                f"name server address {text!r}: unknown scheme {scheme!r} (use host:port for staticmq "
                "or rocketmq://host:port for Apache RocketMQ)"
            )
    hosts = split_addresses(raw)
    if not hosts:
        raise InvalidOptionError(f"name server address {text!r} names no host:port")
    if scheme == "memory":
        return ClusterAddress(scheme, hosts)
    for host in hosts:
        name, sep, port = host.rpartition(":")
        if not sep or not name or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidOptionError(f"name server address {text!r}: {host!r} is not host:port")
    return ClusterAddress(scheme, hosts)
