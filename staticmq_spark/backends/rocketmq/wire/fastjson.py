"""Tolerant reading of RocketMQ's JSON bodies: fastjson writes bare numeric map keys (`{0:"a"}`)."""

from __future__ import annotations

import json
import re
from typing import Any

from staticmq_spark.backends.rocketmq.wire.frames import FrameError

_BARE_KEY = re.compile(rb'("(?:[^"\\]|\\.)*")|([{,]\s*)(-?\d+)(\s*:)')


def loads(body: bytes) -> Any:
    """json.loads after quoting bare integer keys outside string literals."""
    fixed = _BARE_KEY.sub(lambda m: m.group(1) or m.group(2) + b'"' + m.group(3) + b'"' + m.group(4), body)
    try:
        return json.loads(fixed)
    except ValueError as exc:
        raise FrameError(f"RocketMQ sent a body that is not JSON even with bare keys quoted: {exc}") from None
