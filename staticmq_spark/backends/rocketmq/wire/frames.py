"""RemotingCommand frames: pure encode/decode of RocketMQ's wire unit (JSON or ROCKETMQ headers).

int32 totalLength (= 4 + H + B) | int32 (serializeType << 24 | H) | header (H) | body (B)
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

from staticmq_spark.errors import StaticMQError

JSON = 0
ROCKETMQ = 1
RESPONSE_FLAG = 1
ONEWAY_FLAG = 2
# The largest answer a RocketMQ 5.5 broker sends: a pull answer holds at most
# DefaultMessageStore.MAX_PULL_MSG_SIZE (128 MiB) of messages, plus its header. RocketMQ's own client
# stops at 16 MiB (NettyDecoder), so a broker with maxTransferBytesOnMessageInMemory above that
# breaks it; this client reads such answers. Anything longer is not RocketMQ (e.g. an HTTP port).
MAX_FRAME = 129 * 1024 * 1024
CLIENT_VERSION = 493  # MQVersion V5_4_0: routes come back as standard JSON (>= 401)


class FrameError(StaticMQError):
    """A frame that does not follow RocketMQ's remoting format."""

    code = "ROCKETMQ_FRAME"


@dataclass(frozen=True, slots=True)
class RemotingCommand:
    code: int
    opaque: int
    flag: int = 0
    remark: str | None = None
    ext: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)


def encode_request(code: int, opaque: int, ext: dict[str, object], body: bytes = b"", oneway: bool = False) -> bytes:
    """A request frame with a JSON header; every extFields value travels as a string."""
    header = {
        "code": int(code),
        "extFields": {k: _ext_value(v) for k, v in ext.items() if v is not None},
        "flag": ONEWAY_FLAG if oneway else 0,
        "language": "PYTHON",
        "opaque": opaque,
        "serializeTypeCurrentRPC": "JSON",
        "version": CLIENT_VERSION,
    }
    raw = json.dumps(header, separators=(",", ":")).encode()
    return struct.pack(">ii", 4 + len(raw) + len(body), (JSON << 24) | len(raw)) + raw + body


def _ext_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def frame_length(prefix: bytes) -> int:
    """The length of the frame that follows a 4-byte length prefix (checked against MAX_FRAME)."""
    length = int.from_bytes(prefix, "big", signed=True)
    if length < 4 or length > MAX_FRAME:
        raise FrameError(f"frame length {length} is outside [4, {MAX_FRAME}]")
    return length


def decode_frame(frame: bytes) -> RemotingCommand:
    """One frame without its length prefix: header word, header, body."""
    if len(frame) < 4:
        raise FrameError(f"frame of {len(frame)} bytes has no header word")
    (word,) = struct.unpack_from(">i", frame)
    kind, size = (word >> 24) & 0xFF, word & 0xFFFFFF
    if 4 + size > len(frame):
        raise FrameError(f"header length {size} exceeds the frame ({len(frame)} bytes)")
    header, body = frame[4 : 4 + size], bytes(frame[4 + size :])
    if kind == JSON:
        return _from_json(header, body)
    if kind == ROCKETMQ:
        return _from_binary(header, body)
    raise FrameError(f"unknown serialize type {kind}")


def _from_json(header: bytes, body: bytes) -> RemotingCommand:
    try:
        raw = json.loads(header)
        return RemotingCommand(
            code=int(raw["code"]),
            opaque=int(raw.get("opaque", 0)),
            flag=int(raw.get("flag", 0)),
            remark=raw.get("remark"),
            ext={str(k): str(v) for k, v in (raw.get("extFields") or {}).items()},
            body=body,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise FrameError(f"malformed JSON header: {exc!r}") from None


def _from_binary(header: bytes, body: bytes) -> RemotingCommand:
    try:
        code, _language, _version, opaque, flag, remark_len = struct.unpack_from(">hbhiii", header)
        pos = 17
        remark = header[pos : pos + remark_len].decode() if remark_len > 0 else None
        pos += max(remark_len, 0)
        (ext_len,) = struct.unpack_from(">i", header, pos)
        pos += 4
        end = pos + ext_len
        ext: dict[str, str] = {}
        while pos < end:
            (klen,) = struct.unpack_from(">h", header, pos)
            key = header[pos + 2 : pos + 2 + klen].decode()
            pos += 2 + klen
            (vlen,) = struct.unpack_from(">i", header, pos)
            ext[key] = header[pos + 4 : pos + 4 + vlen].decode()
            pos += 4 + vlen
        return RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext=ext, body=body)
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"malformed ROCKETMQ header: {exc!r}") from None
