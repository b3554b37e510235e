"""Validation of topic, group and broker names: the rules that keep names inside a data directory."""

from __future__ import annotations

import re

from staticmq_spark.errors import InvalidArgumentError, InvalidTopicNameError

MAX_TOPIC_LENGTH = 127
MAX_GROUP_LENGTH = 255
# RocketMQ's character set: letters, digits, '_', '-', '%' and '|'. No '.', '/' or '\\', so a
# name can never escape the directory it is stored under.
_NAME_RE = re.compile(r"[A-Za-z0-9_\-%|]+")  # always fullmatch: "$" would accept a trailing newline
_BROKER_RE = re.compile(r"[A-Za-z0-9_\-]{1,64}")

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_PREFIX = "rmq_sys_"


def shown(name: str, limit: int = 60) -> str:
    """`name` quoted for an error message, cut to `limit` characters (a 10 KB name is not echoed)."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}... ({len(name)} characters)"


def validate_topic(name: str, *, allow_system: bool = False) -> str:
    """Return `name` if it is a valid topic name, else raise InvalidTopicNameError."""
    if not name:
        raise InvalidTopicNameError("topic name is empty")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicNameError(
            f"topic name {shown(name, 40)} is too long; at most {MAX_TOPIC_LENGTH} characters are allowed"
        )
    if not _NAME_RE.fullmatch(name):
        raise InvalidTopicNameError(
            f"topic name {shown(name)} contains characters other than letters, digits, '_', '-', '%', '|'"
        )
    if not allow_system and (
        name.startswith(RETRY_PREFIX) or name.startswith(DLQ_PREFIX) or name.startswith(SYSTEM_PREFIX)
    ):
        raise InvalidTopicNameError(
            f"topic name {shown(name)} uses a reserved prefix ({RETRY_PREFIX!r}, {DLQ_PREFIX!r}, {SYSTEM_PREFIX!r})"
        )
    return name


def validate_group(name: str) -> str:
    """Return `name` if it is a valid consumer group name."""
    if not name or len(name) > MAX_GROUP_LENGTH or not _NAME_RE.fullmatch(name):
        raise InvalidArgumentError(
            f"consumer group {shown(name)} must be 1-{MAX_GROUP_LENGTH} letters, digits, '_', '-', '%', '|'"
        )
    return name


def validate_broker_name(name: str) -> str:
    """Return `name` if it is a valid broker name."""
    if not _BROKER_RE.fullmatch(name):
        raise InvalidArgumentError(f"broker name {shown(name)} must be 1-64 letters, digits, '_' or '-'")
    return name


def retry_topic(group: str, topic: str) -> str:
    return f"{RETRY_PREFIX}{group}_{topic}"


def dlq_topic(group: str) -> str:
    return f"{DLQ_PREFIX}{group}"


def split_addresses(text: str) -> tuple[str, ...]:
    """`a:1;b:2` (or `a:1,b:2`) -> ("a:1", "b:2"): the one split of a name-server address list."""
    return tuple(h.strip() for h in (text or "").replace(",", ";").split(";") if h.strip())
