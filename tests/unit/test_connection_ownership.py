"""One client instance per backend (backends/api.py): the connection state of a cluster is made in
one place per backend and handed to every port, so no port below the seam opens connections of
its own. A structural test that can fail: it reads every module of staticmq_spark and finds each
call that makes connection state."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "staticmq_spark"

# What makes connection state, and the one module allowed to call each maker (besides the module
# that defines it). staticmq: channels, the route cache, the reachability detector; RocketMQ: the
# client instance, its remoting client and connection pool, the name server's answers it caches
# (routes, the broker table: a call of fetch_route or fetch_brokers anywhere else is a route cache
# of its own) and the logic queues' leaders; the memory backend: the lookup of the cluster object.
MAKERS: dict[str, set[str]] = {
    "Channels": {"backends/staticmq/client_instance.py"},
    "RouteCache": {"backends/staticmq/client_instance.py"},
    "ReachabilityDetector": {"backends/staticmq/client_instance.py"},
    "open_channel": {"protocol/transport/channels.py"},
    "insecure_channel": {"protocol/transport/channels.py"},
    "secure_channel": {"protocol/transport/channels.py"},
    "RocketMQClientInstance": {"backends/rocketmq/backend.py"},
    "RemotingClient": {"backends/rocketmq/client_instance.py"},
    "fetch_route": {"backends/rocketmq/client_instance.py"},
    "fetch_brokers": {"backends/rocketmq/client_instance.py"},
    "Leaders": {"backends/rocketmq/client_instance.py"},
    "ConnectionPool": {"backends/rocketmq/wire/remoting.py"},
    "_cluster": {"backends/memory/backend.py"},
}
# A maker whose name means something else elsewhere is looked for only where it means this.
SCOPE = {"_cluster": "backends/memory/"}
# Local clusters the CLI, demo and tests start are not backends: they talk to what they started.
NOT_A_BACKEND = ("local_clusters/",)


def _calls(path: Path, source: str | None = None) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(source if source is not None else path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in MAKERS:
                found.append((name, node.lineno))
    return found


def _modules() -> list[tuple[str, Path]]:
    return [
        (p.relative_to(PACKAGE).as_posix(), p)
        for p in sorted(PACKAGE.rglob("*.py"))
        if "/pb/" not in p.as_posix() and not p.relative_to(PACKAGE).as_posix().startswith(NOT_A_BACKEND)
    ]


def _made_elsewhere(calls: list[tuple[str, str, int]]) -> list[str]:
    return [
        f"staticmq_spark/{rel}:{line} calls {name}()"
        for rel, name, line in calls
        if rel not in MAKERS[name] and rel.startswith(SCOPE.get(name, ""))
    ]


def test_no_port_below_the_seam_opens_its_own_connections() -> None:
    wrong = _made_elsewhere([(rel, name, line) for rel, path in _modules() for name, line in _calls(path)])
    assert not wrong, "connection state made outside its backend's client instance:\n" + "\n".join(wrong)


def test_a_route_cache_of_a_ports_own_fails_the_check() -> None:
    """A RocketMQ port that asks the name server for routes itself (and so keeps them itself) is
    found, as is one that makes its own leaders cache or remoting client."""
    planted = """
class Reader:
    def route(self, topic):
        if topic not in self._routes:
            self._routes[topic] = self.client.fetch_route(topic)
        return self._routes[topic]

    def masters(self):
        return self.client.fetch_brokers()

    def leaders(self):
        return Leaders(self.route, RemotingClient(("127.0.0.1:9876",)))
"""
    path = PACKAGE / "backends/rocketmq/reader.py"
    calls = [("backends/rocketmq/reader.py", name, line) for name, line in _calls(path, planted)]
    wrong = _made_elsewhere(calls)
    for maker in ("fetch_route", "fetch_brokers", "Leaders", "RemotingClient"):
        assert any(f"calls {maker}()" in w for w in wrong), (maker, wrong)


def test_each_backend_makes_its_client_instance_in_one_place() -> None:
    makers = {(rel, name) for rel, path in _modules() for name, _ in _calls(path)}
    assert ("backends/staticmq/client_instance.py", "Channels") in makers
    assert ("backends/rocketmq/backend.py", "RocketMQClientInstance") in makers
    assert ("backends/rocketmq/client_instance.py", "RemotingClient") in makers
    assert ("backends/rocketmq/client_instance.py", "fetch_route") in makers
    assert ("backends/memory/backend.py", "_cluster") in makers
