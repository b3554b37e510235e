"""Request signing (protocol/security/auth.py), ACL files and decisions (protocol/security/acl.py), the per-RPC rules
of the servers (broker_stub/auth.py) and the exposure rule of the server commands."""

from __future__ import annotations

import hashlib
import hmac
import logging
from pathlib import Path

import pytest

from broker_stub.auth import NEEDS
from staticmq_spark.cli.exposure import check_exposure
from staticmq_spark.errors import AccessDeniedError, InvalidOptionError, UnauthenticatedError
from staticmq_spark.protocol.pb import consume_pb2, staticmq_pb2
from staticmq_spark.protocol.security.acl import Acl, Need, Perm, load_acl, parse_acl
from staticmq_spark.protocol.security.auth import (
    AUTHORIZATION,
    DATE_TIME,
    Credentials,
    check_signature,
    credentials_of,
    signed_call,
)

NOW = 1_795_000_000.0  # 2026-11-18T11:06:40Z
ACL_TEXT = """
accounts:
  - accessKey: admin
    secretKey: admin-secret-123
    admin: true
  - accessKey: etl
    secretKey: etl-secret-456
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: ["orders=PUB|SUB", "results=PUB", "audit=SUB"]
    groupPerms: ["etl-group=SUB"]
  - accessKey: reader
    secretKey: reader-secret-789
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
    topicPerms: ["secret=DENY"]
"""


@pytest.fixture
def acl() -> Acl:
    import yaml

    return parse_acl(yaml.safe_load(ACL_TEXT), "test")


# ------------------------------------------------------------------ signing


def test_a_signed_call_carries_rocketmqs_authorization_and_date_time_headers() -> None:
    (k1, header), (k2, stamp) = Credentials("etl", "etl-secret-456").grpc_metadata(NOW)
    assert (k1, k2) == (AUTHORIZATION, DATE_TIME)
    assert stamp == "20261118T110640Z"
    expected = hmac.new(b"etl-secret-456", stamp.encode(), hashlib.sha1).hexdigest()
    assert header == f"MQv2-HMAC-SHA1 Credential=etl, SignedHeaders=x-mq-date-time, Signature={expected}"


def test_the_right_secret_within_the_skew_is_accepted() -> None:
    call = signed_call(Credentials("etl", "etl-secret-456").grpc_metadata(NOW))
    assert call.access_key == "etl"
    check_signature(call, "etl-secret-456", now=NOW + 299)
    check_signature(call, "etl-secret-456", now=NOW - 299)


def test_a_wrong_secret_is_refused_naming_the_access_key() -> None:
    call = signed_call(Credentials("etl", "not-the-secret").grpc_metadata(NOW))
    with pytest.raises(UnauthenticatedError, match="wrong signature for access key 'etl'"):
        check_signature(call, "etl-secret-456", now=NOW)


def test_a_stale_timestamp_is_refused_as_a_replay() -> None:
    call = signed_call(Credentials("etl", "etl-secret-456").grpc_metadata(NOW - 600))
    with pytest.raises(UnauthenticatedError, match=r"600 s ago.*replayed request"):
        check_signature(call, "etl-secret-456", now=NOW)
    ahead = signed_call(Credentials("etl", "etl-secret-456").grpc_metadata(NOW + 900))
    with pytest.raises(UnauthenticatedError, match="ahead"):
        check_signature(ahead, "etl-secret-456", now=NOW)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ((), "carries no credentials"),
        (((AUTHORIZATION, "Basic abc"),), "malformed authorization header"),
        (
            ((AUTHORIZATION, "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=host, Signature=00"),),
            "must cover the x-mq-date-time",
        ),
        (((AUTHORIZATION, "MQv2-HMAC-SHA1 Credential=a, SignedHeaders=x-mq-date-time, Signature=00"),), "no x-mq"),
    ],
)
def test_missing_or_malformed_signing_headers_are_unauthenticated(metadata: tuple, message: str) -> None:
    with pytest.raises(UnauthenticatedError, match=message):
        signed_call(metadata)


def test_a_garbled_time_is_refused() -> None:
    (auth, _), _ = Credentials("etl", "etl-secret-456").grpc_metadata(NOW), None
    forged = [auth, (DATE_TIME, "yesterday")]
    header = auth[1].rsplit("=", 1)[0] + "=" + hmac.new(b"etl-secret-456", b"yesterday", hashlib.sha1).hexdigest()
    forged[0] = (AUTHORIZATION, header)
    with pytest.raises(UnauthenticatedError, match="not a yyyyMMddTHHmmssZ time"):
        check_signature(signed_call(forged), "etl-secret-456", now=NOW)


def test_credentials_keep_the_secret_out_of_repr_and_need_both_keys() -> None:
    assert "etl-secret" not in repr(Credentials("etl", "etl-secret-456"))
    assert credentials_of(("a", "b")) == Credentials("a", "b")
    with pytest.raises(InvalidOptionError, match="both an access key and a secret key"):
        Credentials("etl", "")
    with pytest.raises(InvalidOptionError, match="pair"):
        credentials_of(["a", "b"])  # type: ignore[arg-type]


# ------------------------------------------------------------------ ACL decisions


def test_admin_accounts_may_do_everything(acl: Acl) -> None:
    admin = acl.account("admin")
    acl.authorize(admin, Need("delete topics", admin=True))
    acl.authorize(admin, Need("send to", topic="anything", topic_perm=Perm.PUB, group="any"))


def test_admin_only_commands_are_refused_to_other_accounts(acl: Acl) -> None:
    with pytest.raises(AccessDeniedError, match="account 'etl' may not delete topics: it needs an admin account"):
        acl.authorize(acl.account("etl"), Need("delete topics", admin=True))


@pytest.mark.parametrize(
    ("account", "topic", "perm", "group", "allowed"),
    [
        ("etl", "orders", Perm.PUB, "", True),
        ("etl", "orders", Perm.SUB, "etl-group", True),
        ("etl", "results", Perm.PUB, "", True),
        ("etl", "results", Perm.SUB, "", False),  # PUB only
        ("etl", "audit", Perm.PUB, "", False),  # SUB only
        ("etl", "audit", Perm.PUB | Perm.SUB, "", True),  # metadata: either will do
        ("etl", "elsewhere", Perm.PUB | Perm.SUB, "", False),  # default DENY
        ("etl", "orders", Perm.SUB, "other-group", False),  # group default DENY
        ("etl", "%RETRY%etl-group", Perm.SUB, "etl-group", True),  # a retry topic belongs to its group
        ("etl", "%DLQ%other-group", Perm.SUB, "", False),
        ("reader", "anything", Perm.SUB, "any-group", True),  # defaults SUB
        ("reader", "anything", Perm.PUB, "", False),
        ("reader", "secret", Perm.SUB, "", False),  # an explicit DENY beats the default
    ],
)
def test_topic_and_group_permissions(acl: Acl, account: str, topic: str, perm: Perm, group: str, allowed: bool) -> None:
    need = Need("use", topic=topic, topic_perm=perm, group=group)
    if allowed:
        acl.authorize(acl.account(account), need)
    else:
        with pytest.raises(AccessDeniedError, match=f"account '{account}' may not use"):
            acl.authorize(acl.account(account), need)


def test_an_unknown_access_key_is_unauthenticated(acl: Acl) -> None:
    with pytest.raises(UnauthenticatedError, match="unknown access key 'nobody'"):
        acl.account("nobody")


# ------------------------------------------------------------------ ACL files


def test_an_acl_file_in_rocketmqs_shape_loads(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL_TEXT)
    acl = load_acl(path)
    assert sorted(acl.accounts) == ["admin", "etl", "reader"]
    assert acl.first_admin() is not None and acl.first_admin().access_key == "admin"  # type: ignore[union-attr]
    assert acl.account("etl").topic_perms["orders"] == Perm.PUB | Perm.SUB


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accounts: [", "not valid YAML"),
        ("users: []", "expected a mapping with an 'accounts' list"),
        ("accounts: []", "no accounts"),
        ("accounts: []\nglobalWhiteRemoteAddresses: []", "unknown key"),
        ("accounts:\n  - accessKey: a\n    secretKey: short", "secretKey must be a string of at least 6"),
        ("accounts:\n  - accessKey: a\n    secretKey: secret-1\n    admin: yes-please", "admin must be true or false"),
        ("accounts:\n  - accessKey: a\n    secretKey: secret-1\n    defaultTopicPerm: ALL", "not one of DENY, PUB"),
        ("accounts:\n  - accessKey: a\n    secretKey: secret-1\n    topicPerms: [orders]", "is not 'name=PERM'"),
        ("accounts:\n  - accessKey: a\n    secretKey: secret-1\n    whiteRemoteAddress: x", "unknown key"),
        ("accounts:\n  - {accessKey: a, secretKey: secret-1}\n  - {accessKey: a, secretKey: secret-2}", "twice"),
    ],
)
def test_a_bad_acl_file_is_refused_naming_the_file_and_the_mistake(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "acl.yml"
    path.write_text(text)
    with pytest.raises(InvalidOptionError, match=message) as info:
        load_acl(path)
    assert str(path) in str(info.value)


def test_a_missing_acl_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidOptionError, match=r"ACL file .*missing\.yml"):
        load_acl(tmp_path / "missing.yml")


# ------------------------------------------------------------------ per-RPC rules


def test_every_rpc_of_every_service_has_an_authorization_rule() -> None:
    methods = {
        m.name
        for module in (staticmq_pb2, consume_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for m in service.methods
    }
    assert methods == set(NEEDS)


@pytest.mark.parametrize(
    ("method", "message", "need"),
    [
        ("Send", staticmq_pb2.SendRequest(topic="t"), Need("send to", topic="t", topic_perm=Perm.PUB)),
        (
            "Pull",
            staticmq_pb2.PullRequest(topic="t", group="g"),
            Need("pull from", topic="t", topic_perm=Perm.SUB, group="g"),
        ),
        (
            "Pop",
            consume_pb2.PopRequest(topic="t", group="g"),
            Need("pop from", topic="t", topic_perm=Perm.SUB, group="g"),
        ),
        (
            "WriteMapping",
            staticmq_pb2.WriteMappingRequest(),
            Need("write static-topic mappings (create, grow or remap)", admin=True),
        ),
        ("RegisterBroker", staticmq_pb2.RegisterBrokerRequest(name="b"), Need("register a broker", admin=True)),
        (
            "GetRoute",
            staticmq_pb2.TopicName(topic="t"),
            Need("read the route of", topic="t", topic_perm=Perm.PUB | Perm.SUB),
        ),
        (
            "StageRows",
            staticmq_pb2.StageRequest(topic="t").SerializeToString(),
            Need("write to", topic="t", topic_perm=Perm.PUB),
        ),
    ],
)
def test_what_each_rpc_needs(method: str, message: object, need: Need) -> None:
    assert NEEDS[method](message) == need


# ------------------------------------------------------------------ exposure


def test_a_non_loopback_bind_needs_acl_or_insecure_and_always_warns(caplog: pytest.LogCaptureFixture) -> None:
    check_exposure("127.0.0.1", False, "broker")
    with pytest.raises(InvalidOptionError, match="give --acl FILE"):
        check_exposure("0.0.0.0", False, "broker")
    with caplog.at_level(logging.WARNING, logger="staticmq.cli"):
        check_exposure("0.0.0.0", False, "broker", acl=True)
        check_exposure("10.1.2.3", True, "name server")
    assert "plain text" in caplog.text and "without authentication (--insecure)" in caplog.text
