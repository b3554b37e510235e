"""Validation of topic, group and broker names: the rules that keep names inside a data directory."""

from __future__ import annotations

import re

from staticmq_spark.errors import InvalidArgumentError, InvalidTopicNameError

MAX_TOPIC_LENGTH = 127
MAX_GROUP_LENGTH = 255
# RocketMQ's character set: letters, digits, '_', '-', '%' and '|'. No '.', '/' or '\\', so a
# name can never escape the directory it is stored under.
_NAME_RE = re.compile(r"^[A-Za-z0-9_\-%|]+$")
_BROKER_RE = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_PREFIX = "rmq_sys_"


def validate_topic(name: str, *, allow_system: bool = False) -> str:
    """Return `name` if it is a valid topic name, else raise InvalidTopicNameError."""
    if not name:
        raise InvalidTopicNameError("topic name is empty")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicNameError(
            f"topic name {name[:40]!r}... is {len(name)} characters long; at most {MAX_TOPIC_LENGTH} are allowed"
        )
    if not _NAME_RE.match(name):
        raise InvalidTopicNameError(
            f"topic name {name!r} contains characters other than letters, digits, '_', '-', '%', '|'"
        )
    if not allow_system and (
        name.startswith(RETRY_PREFIX) or name.startswith(DLQ_PREFIX) or name.startswith(SYSTEM_PREFIX)
    ):
        raise InvalidTopicNameError(
            f"topic name {name!r} uses a reserved prefix ({RETRY_PREFIX!r}, {DLQ_PREFIX!r}, {SYSTEM_PREFIX!r})"
        )
    return name


def validate_group(name: str) -> str:
    """Return `name` if it is a valid consumer group name."""
    if not name or len(name) > MAX_GROUP_LENGTH or not _NAME_RE.match(name):
        raise InvalidArgumentError(
            f"consumer group {name!r} must be 1-{MAX_GROUP_LENGTH} letters, digits, '_', '-', '%', '|'"
        )
    return name


def validate_broker_name(name: str) -> str:
    """Return `name` if it is a valid broker name."""
    if not _BROKER_RE.match(name):
        raise InvalidArgumentError(f"broker name {name!r} must be 1-64 letters, digits, '_' or '-'")
    return name


def retry_topic(group: str, topic: str) -> str:
    return f"{RETRY_PREFIX}{group}_{topic}"


def dlq_topic(group: str) -> str:
    return f"{DLQ_PREFIX}{group}"
