"""A cluster started with `--acl` and `--tls-cert/--tls-key`: every call is signed and checked,
everything travels over TLS, through the CLI, the Python client and raw gRPC (SPEC section 11)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from staticmq_spark.client import Admin, PopConsumer, Producer, PullConsumer
from staticmq_spark.errors import AccessDeniedError, BrokerUnavailableError, UnauthenticatedError
from staticmq_spark.local_clusters.tls_files import TlsFiles, write_tls_files
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.pb import staticmq_pb2_grpc as pb_grpc
from staticmq_spark.protocol.security.auth import ClientSecurity, Credentials
from staticmq_spark.protocol.transport.channels import open_channel
from tests.support.cli import staticmq
from tests.support.cluster_process import ClusterProcess

ADMIN = ("admin", "admin-secret-123")
ETL = ("etl", "etl-secret-456")
ACL = """
accounts:
  - accessKey: admin
    secretKey: admin-secret-123
    admin: true
  - accessKey: etl
    secretKey: etl-secret-456
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["orders=PUB|SUB", "audit=SUB"]
    groupPerms: ["etl-group=SUB"]
"""


class Secure:
    def __init__(self, cluster: ClusterProcess, tls: TlsFiles, acl: Path) -> None:
        self.cluster, self.tls, self.acl = cluster, tls, acl
        self.namesrv = cluster.namesrv

    def client(self, keys: tuple[str, str] | None = ETL) -> dict[str, object]:
        return {"credentials": keys, "tls_ca": str(self.tls.ca)}

    def cli(self, *args: str, keys: tuple[str, str] | None = ETL, stdin: str | None = None):  # type: ignore[no-untyped-def]
        flags = ["-n", self.namesrv, "--tls-ca", str(self.tls.ca)]
        if keys is not None:
            flags += ["--access-key", keys[0], "--secret-key", keys[1]]
        return staticmq(*args, *flags, stdin=stdin)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    root = tmp_path_factory.mktemp("secure")
    tls = write_tls_files(root / "tls")
    acl = root / "acl.yml"
    acl.write_text(ACL)
    flags = ("--acl", str(acl), "--tls-cert", str(tls.cert), "--tls-key", str(tls.key), "--tls-ca", str(tls.ca))
    cluster = ClusterProcess(root / "cluster", 2, extra_args=flags)
    try:
        s = Secure(cluster, tls, acl)
        with Admin(s.namesrv, **s.client(ADMIN)) as admin:  # type: ignore[arg-type]
            admin.update_static_topic("orders", 4, cluster="DefaultCluster")
            admin.update_static_topic("audit", 2, cluster="DefaultCluster")
        yield s
    finally:
        cluster.stop()


def _max_offsets(s: Secure, topic: str) -> list[int]:
    with PullConsumer(s.namesrv, **s.client(ADMIN)) as consumer:  # type: ignore[arg-type]
        return [o.max_offset for o in consumer.offsets(topic)]


def test_tls_round_trip_through_the_cli_with_keys_from_the_environment(secure: Secure) -> None:
    env = {"STATICMQ_ACCESS_KEY": ETL[0], "STATICMQ_SECRET_KEY": ETL[1]}
    sent = staticmq(
        "send", "-n", secure.namesrv, "--tls-ca", str(secure.tls.ca), "-t", "orders", "--key", "k1", "hi", env=env
    )
    assert sent.returncode == 0, sent.stderr
    ack = json.loads(sent.stdout.splitlines()[0])
    pulled = secure.cli("pull", "-t", "orders", "--from", "earliest")
    assert pulled.returncode == 0, pulled.stderr
    rows = [json.loads(line) for line in pulled.stdout.splitlines()]
    assert {"hi"} <= {r["body"] for r in rows}
    assert any(r["queueId"] == ack["queueId"] and r["queueOffset"] == ack["queueOffset"] for r in rows)


def test_a_request_without_credentials_is_refused_and_names_what_to_give(secure: Secure) -> None:
    before = _max_offsets(secure, "orders")
    out = secure.cli("send", "-t", "orders", "--key", "k", "anonymous", keys=None)
    assert out.returncode != 0
    said = out.stdout + out.stderr  # send reports each message's error as a JSON line
    assert "carries no credentials" in said and "--access-key" in said
    assert _max_offsets(secure, "orders") == before


def test_a_wrong_secret_is_refused_naming_the_account(secure: Secure) -> None:
    out = secure.cli("admin", "topicStatus", "-t", "orders", keys=("etl", "not-the-secret"))
    assert out.returncode != 0
    assert "wrong signature for access key 'etl'" in out.stderr


def test_a_stale_timestamp_is_refused(secure: Secure) -> None:
    channel = open_channel(secure.namesrv, ClientSecurity(None, str(secure.tls.ca)))
    stale = Credentials(*ETL).grpc_metadata(time.time() - 3600)
    with pytest.raises(grpc.RpcError) as info:
        pb_grpc.NameServerStub(channel).GetRoute(pb.TopicName(topic="orders"), metadata=stale, timeout=10)
    channel.close()
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert re.search(r"signed at \d{8}T\d{6}Z, 360\d s ago", str(info.value.details()))


def test_an_account_outside_its_permissions_is_refused_and_nothing_changes(secure: Secure) -> None:
    before = _max_offsets(secure, "audit")
    out = secure.cli("send", "-t", "audit", "--queue", "0", "forbidden")  # etl may only read audit
    assert out.returncode != 0
    assert "account 'etl' may not send to topic 'audit': it needs PUB and has SUB" in out.stdout + out.stderr
    assert _max_offsets(secure, "audit") == before
    other = PullConsumer(secure.namesrv, group="someone-else", **secure.client())  # type: ignore[arg-type]
    with other, pytest.raises(AccessDeniedError, match="as group 'someone-else'"):
        other.commit("orders", 0, 0)
    with PullConsumer(secure.namesrv, group="etl-group", **secure.client()) as consumer:  # type: ignore[arg-type]
        consumer.commit("orders", 0, 0)
        assert consumer.committed("orders", 0) == 0


def test_admin_only_commands_need_an_admin_account(secure: Secure) -> None:
    grow = secure.cli("admin", "updateStaticTopic", "-t", "orders", "-qn", "8", "-c", "DefaultCluster")
    assert grow.returncode != 0
    assert "account 'etl' may not write static-topic mappings" in grow.stderr and "admin account" in grow.stderr
    delete = secure.cli("admin", "deleteTopic", "-t", "orders")
    assert delete.returncode != 0 and "needs an admin account" in delete.stderr
    route = json.loads(secure.cli("admin", "topicRoute", "-t", "orders", "--json").stdout)
    assert route["totalQueues"] == 4, "nothing was grown or deleted"
    assert (
        secure.cli(
            "admin", "updateStaticTopic", "-t", "grown", "-qn", "2", "-c", "DefaultCluster", keys=ADMIN
        ).returncode
        == 0
    )


def test_a_fake_broker_registration_is_refused(secure: Secure) -> None:
    fake = pb.RegisterBrokerRequest(name="broker-0", cluster="DefaultCluster", addr="127.0.0.1:1")
    for keys, code in ((None, grpc.StatusCode.UNAUTHENTICATED), (ETL, grpc.StatusCode.PERMISSION_DENIED)):
        channel = open_channel(secure.namesrv, ClientSecurity(Credentials(*keys) if keys else None, str(secure.tls.ca)))
        with pytest.raises(grpc.RpcError) as info:
            pb_grpc.NameServerStub(channel).RegisterBroker(fake, timeout=10)
        channel.close()
        assert info.value.code() == code
    with Admin(secure.namesrv, **secure.client(ADMIN)) as admin:  # type: ignore[arg-type]
        assert {b.name: b.addr for b in admin.cluster_info()}["broker-0"] != "127.0.0.1:1"


def test_the_python_client_takes_credentials_and_a_ca(secure: Secure) -> None:
    with Producer(secure.namesrv, **secure.client()) as producer:  # type: ignore[arg-type]
        assert producer.send("orders", b"py", key="py").topic == "orders"
    anonymous = Admin(secure.namesrv, tls_ca=str(secure.tls.ca))
    with anonymous, pytest.raises(UnauthenticatedError, match="no credentials"):
        anonymous.cluster_info()
    plain = Admin(secure.namesrv, credentials=ETL, timeout_s=2, wait_for_ready=False)
    with plain, pytest.raises(BrokerUnavailableError):  # plain text to a TLS server: no answer
        plain.cluster_info()


def test_bad_security_flags_stop_a_server_at_start_naming_the_flag(tmp_path: Path) -> None:
    bad = tmp_path / "acl.yml"
    bad.write_text("accounts:\n  - accessKey: a\n    secretKey: short\n")
    cases = [
        (["namesrv", "--port", "0", "--acl", str(bad)], "secretKey must be a string of at least 6"),
        (["namesrv", "--port", "0", "--tls-cert", str(bad)], "--tls-cert and --tls-key go together"),
        (["namesrv", "--port", "0", "--tls-cert", str(bad), "--tls-key", str(bad)], "holds no PEM certificate"),
        (["namesrv", "--host", "0.0.0.0", "--port", "0"], "give --acl FILE"),
    ]
    for args, message in cases:
        out = subprocess.run(
            [sys.executable, "-m", "staticmq_spark.cli", *args], capture_output=True, text=True, timeout=60
        )
        assert out.returncode != 0 and message in out.stderr, (args, out.stderr[-2000:])


def test_pop_and_ack_need_sub_on_the_topic_and_the_group(secure: Secure) -> None:
    with Producer(secure.namesrv, **secure.client()) as producer:  # type: ignore[arg-type]
        producer.send_batch("orders", [b"p1", b"p2"], keys=["a", "b"])
    with PopConsumer(secure.namesrv, "etl-group", "orders", wait_s=1, **secure.client()) as consumer:  # type: ignore[arg-type]
        popped = consumer.receive(max_messages=32)
        assert popped, "etl may pop as etl-group"
        consumer.ack_batch(popped)
    stranger = PopConsumer(secure.namesrv, "other-group", "orders", wait_s=1, **secure.client())  # type: ignore[arg-type]
    with stranger, pytest.raises(AccessDeniedError, match="may not pop from topic 'orders' as group 'other-group'"):
        stranger.receive(max_messages=1)


HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=200)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    authorization=st.one_of(
        HEADER_TEXT,
        st.builds(
            lambda key, signed, sig: f"MQv2-HMAC-SHA1 Credential={key}, SignedHeaders={signed}, Signature={sig}",
            st.sampled_from(["etl", "admin", "nobody", "", "a,b"]),
            st.sampled_from(["x-mq-date-time", "host", "x-mq-date-time;host", ""]),
            st.text(alphabet="0123456789abcdefABCDEF", max_size=60),
        ),
    ),
    stamp=st.one_of(HEADER_TEXT, st.sampled_from(["20261125T120000Z", "99999999T999999Z", "", "0"])),
    method=st.sampled_from(["GetRoute", "GetClusterInfo", "RegisterBroker"]),
)
def test_forged_and_garbled_credentials_are_refused_cleanly(
    secure: Secure, authorization: str, stamp: str, method: str
) -> None:
    """Any authorization header and time a client can send: UNAUTHENTICATED (or PERMISSION_DENIED),
    never INTERNAL or UNKNOWN, and the name server stays up."""
    channel = open_channel(secure.namesrv, ClientSecurity(None, str(secure.tls.ca)))
    stub = pb_grpc.NameServerStub(channel)
    request = {
        "GetRoute": pb.TopicName(topic="orders"),
        "GetClusterInfo": pb.Empty(),
        "RegisterBroker": pb.RegisterBrokerRequest(name="broker-0", cluster="DefaultCluster", addr="127.0.0.1:1"),
    }[method]
    try:
        with pytest.raises(grpc.RpcError) as info:
            getattr(stub, method)(
                request, metadata=(("authorization", authorization), ("x-mq-date-time", stamp)), timeout=10
            )
    finally:
        channel.close()
    assert info.value.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED), info.value
