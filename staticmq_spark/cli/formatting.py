"""How the CLI shows values: readable UTC times, JSON with camelCase keys."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any


def readable_ms(ms: int) -> str | None:
    """ms since epoch as ISO 8601 UTC with milliseconds; None for 0 (never)."""
    if ms <= 0:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def camel(name: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), name)


def camel_keys(value: Any) -> Any:
    """The same value with every dict key in camelCase (RocketMQ's JSON casing)."""
    if isinstance(value, dict):
        return {camel(str(k)): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(camel_keys(value), indent=1, sort_keys=True)
