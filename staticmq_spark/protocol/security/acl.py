"""Accounts and permissions, in the shape of RocketMQ's `plain_acl.yml`:

    accounts:
      - accessKey: admin
        secretKey: admin-secret-123
        admin: true                      # topic/group/remap/delete commands, and everything else
      - accessKey: etl
        secretKey: etl-secret-456
        defaultTopicPerm: DENY           # DENY | PUB | SUB | PUB|SUB
        defaultGroupPerm: DENY
        topicPerms: ["orders=PUB|SUB", "results=PUB"]
        groupPerms: ["etl-group=SUB"]

Pure: `load_acl` parses and checks a file, `Acl.authorize` decides one request (`Need`). A retry
or dead-letter topic (%RETRY%g, %DLQ%g) belongs to its group, as in RocketMQ.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from staticmq_spark.errors import AccessDeniedError, InvalidOptionError, UnauthenticatedError, missing_extra
from staticmq_spark.protocol.topics.names import DLQ_PREFIX, RETRY_PREFIX


class Perm(enum.Flag):
    DENY = 0
    PUB = enum.auto()
    SUB = enum.auto()

    @staticmethod
    def parse(text: str, where: str) -> Perm:
        parts = [p.strip().upper() for p in text.split("|")]
        if parts == ["DENY"]:
            return Perm.DENY
        perm = Perm.DENY
        for part in parts:
            if part not in ("PUB", "SUB"):
                raise InvalidOptionError(f"{where}: permission {text!r} is not one of DENY, PUB, SUB, PUB|SUB")
            perm |= Perm[part]
        return perm

    def label(self) -> str:
        return "|".join(p.name for p in (Perm.PUB, Perm.SUB) if p in self and p.name) or "DENY"


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    admin: bool = False
    default_topic_perm: Perm = Perm.DENY
    default_group_perm: Perm = Perm.DENY
    topic_perms: Mapping[str, Perm] = field(default_factory=dict)
    group_perms: Mapping[str, Perm] = field(default_factory=dict)

    def topic_perm(self, topic: str) -> Perm:
        for prefix in (RETRY_PREFIX, DLQ_PREFIX):
            if topic.startswith(prefix):
                return self.group_perm(topic[len(prefix) :])
        return self.topic_perms.get(topic, self.default_topic_perm)

    def group_perm(self, group: str) -> Perm:
        return self.group_perms.get(group, self.default_group_perm)


@dataclass(frozen=True, slots=True)
class Need:
    """What one request needs: the admin flag, or a permission on a topic and/or a group.
    `topic_perm` is satisfied by any of its flags (PUB|SUB: reading a topic's metadata)."""

    action: str
    admin: bool = False
    topic: str = ""
    topic_perm: Perm = Perm.DENY
    group: str = ""


@dataclass(frozen=True, slots=True)
class Acl:
    accounts: Mapping[str, Account]

    def account(self, access_key: str) -> Account:
        try:
            return self.accounts[access_key]
        except KeyError:
            raise UnauthenticatedError(f"unknown access key {access_key[:64]!r}") from None

    def authorize(self, account: Account, need: Need) -> None:
        """Raise AccessDeniedError naming the account, the action and the resource it may not touch."""
        if account.admin:
            return
        who = f"account {account.access_key!r}"
        if need.admin:
            raise AccessDeniedError(f"{who} may not {need.action}: it needs an admin account")
        if need.topic and not (account.topic_perm(need.topic) & need.topic_perm):
            raise AccessDeniedError(
                f"{who} may not {need.action} topic {need.topic!r}: it needs {need.topic_perm.label()} "
                f"and has {account.topic_perm(need.topic).label()}"
            )
        if need.group and Perm.SUB not in account.group_perm(need.group):
            on = f" topic {need.topic!r}" if need.topic else ""
            raise AccessDeniedError(
                f"{who} may not {need.action}{on} as group {need.group!r}: it needs SUB on the group and has "
                f"{account.group_perm(need.group).label()}"
            )

    def first_admin(self) -> Account | None:
        return next((a for a in self.accounts.values() if a.admin), None)


_ACCOUNT_KEYS = {"accessKey", "secretKey", "admin", "defaultTopicPerm", "defaultGroupPerm", "topicPerms", "groupPerms"}
MIN_SECRET_LENGTH = 6  # RocketMQ's rule for secret keys


def parse_acl(data: Any, source: str) -> Acl:
    """An Acl from a parsed YAML document, every mistake named with its place in `source`."""
    if not isinstance(data, dict) or not isinstance(data.get("accounts"), list):
        raise InvalidOptionError(f"{source}: expected a mapping with an 'accounts' list")
    unknown = sorted(set(data) - {"accounts"})
    if unknown:
        raise InvalidOptionError(f"{source}: unknown key(s) {unknown}; only 'accounts' is read")
    accounts: dict[str, Account] = {}
    for i, raw in enumerate(data["accounts"]):
        where = f"{source}: accounts[{i}]"
        account = _account(raw, where)
        if account.access_key in accounts:
            raise InvalidOptionError(f"{where}: access key {account.access_key!r} is listed twice")
        accounts[account.access_key] = account
    if not accounts:
        raise InvalidOptionError(f"{source}: no accounts: every request would be refused")
    return Acl(accounts)


def _account(raw: Any, where: str) -> Account:
    if not isinstance(raw, dict):
        raise InvalidOptionError(f"{where}: expected a mapping")
    unknown = sorted(set(raw) - _ACCOUNT_KEYS)
    if unknown:
        raise InvalidOptionError(f"{where}: unknown key(s) {unknown}; accepted: {sorted(_ACCOUNT_KEYS)}")
    keys = {}
    for name, least in (("accessKey", 1), ("secretKey", MIN_SECRET_LENGTH)):
        value = raw.get(name)
        if not isinstance(value, str) or len(value) < least or value != value.strip():
            raise InvalidOptionError(
                f"{where}: {name} must be a string of at least {least} character(s), without surrounding spaces"
            )
        keys[name] = value
    admin = raw.get("admin", False)
    if not isinstance(admin, bool):
        raise InvalidOptionError(f"{where}: admin must be true or false, got {admin!r}")
    return Account(
        access_key=keys["accessKey"],
        secret_key=keys["secretKey"],
        admin=admin,
        default_topic_perm=Perm.parse(str(raw.get("defaultTopicPerm", "DENY")), f"{where}.defaultTopicPerm"),
        default_group_perm=Perm.parse(str(raw.get("defaultGroupPerm", "DENY")), f"{where}.defaultGroupPerm"),
        topic_perms=_perms(raw.get("topicPerms", []), f"{where}.topicPerms"),
        group_perms=_perms(raw.get("groupPerms", []), f"{where}.groupPerms"),
    )


def _perms(items: Any, where: str) -> dict[str, Perm]:
    if not isinstance(items, list):
        raise InvalidOptionError(f"{where}: expected a list of 'name=PERM' strings")
    out: dict[str, Perm] = {}
    for item in items:
        name, sep, perm = str(item).partition("=")
        if not sep or not name.strip():
            raise InvalidOptionError(f"{where}: {item!r} is not 'name=PERM'")
        out[name.strip()] = Perm.parse(perm, f"{where} {name.strip()!r}")
    return out


def load_acl(path: str | Path) -> Acl:
    """Read an ACL file (YAML), or raise InvalidOptionError naming the file and what is wrong."""
    try:
        import yaml
    except ModuleNotFoundError as exc:
        raise (missing_extra(exc, f"reading the ACL file {path}") or exc) from None

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InvalidOptionError(f"ACL file {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidOptionError(f"ACL file {path} is not valid YAML: {exc}") from None
    return parse_acl(data, f"ACL file {path}")
