"""Many request frames of one request code at once, vectorized: a JSON header per row built with
Arrow string kernels from the fields that differ per row, the rows' bodies after them, every frame
back to back in one buffer. Used where RocketMQ takes one request per message (transactional halves
and their END_TRANSACTION); the same bytes as frames.encode_request, row by row."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from staticmq_spark.backends.rocketmq.wire.batch_encode import scatter_pieces
from staticmq_spark.backends.rocketmq.wire.frames import CLIENT_VERSION, JSON
from staticmq_spark.protocol.rows import arrays

I64 = npt.NDArray[np.int64]
_ESCAPES = {ord("\\"): "\\\\", ord('"'): '\\"'}


def json_escaped(values: pa.Array) -> pa.Array:
    """Strings made safe inside a JSON string literal: backslash, quote and control characters."""
    values = values.cast(pa.string())
    data = values.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    present = np.unique(raw[(raw < 0x20) | (raw == ord("\\")) | (raw == ord('"'))])
    out = values
    if ord("\\") in present:  # first: the other escapes add backslashes
        out = pc.replace_substring(out, "\\", "\\\\")
    for byte in present:
        if int(byte) == ord("\\"):
            continue
        out = pc.replace_substring(out, chr(int(byte)), _ESCAPES.get(int(byte), f"\\u{int(byte):04x}"))
    return out


@dataclass(frozen=True, slots=True)
class EncodedFrames:
    data: npt.NDArray[np.uint8]  # frames back to back, each with its length prefix
    starts: I64  # n + 1 frame boundaries

    def frames(self, a: int, b: int) -> bytes:
        return self.data[self.starts[a] : self.starts[b]].tobytes()


def encode_frames(
    code: int,
    opaques: I64,
    fixed: dict[str, object],
    varying: dict[str, pa.Array],
    bodies: pa.Array | None = None,
) -> EncodedFrames:
    """One request frame per row: extFields `fixed` plus each row's `varying` values (strings;
    escaped here), then the row's body."""
    n = len(opaques)
    fixed_fields = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in fixed.items()}
    head = json.dumps({"code": int(code), "extFields": fixed_fields}, separators=(",", ":"))
    head = head[:-2]  # reopen extFields: `...}}` -> `...`
    parts: list[pa.Array | pa.Scalar] = [arrays.scalar(head + ("," if fixed_fields else ""))]
    for i, (name, values) in enumerate(varying.items()):
        sep = "," if i else ""
        parts += [arrays.scalar(f'{sep}"{name}":"'), json_escaped(values), arrays.scalar('"')]
    tail = '},"flag":0,"language":"PYTHON","opaque":'
    parts += [arrays.scalar(tail), arrays.numbers(np.asarray(opaques, dtype=np.int64)).cast(pa.string())]
    parts.append(arrays.scalar(f',"serializeTypeCurrentRPC":"JSON","version":{CLIENT_VERSION}}}'))
    headers = pc.binary_join_element_wise(*parts, arrays.scalar("")).cast(pa.large_binary())
    body = (bodies if bodies is not None else arrays.repeated(b"", n)).cast(pa.large_binary())
    h_off = np.frombuffer(headers.buffers()[1], dtype=np.int64, count=n + 1)
    b_off = np.frombuffer(body.buffers()[1], dtype=np.int64, count=n + 1 + body.offset)[body.offset :]
    h_len, b_len = np.diff(h_off), np.diff(b_off)
    size = 8 + h_len + b_len
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(size, out=starts[1:])
    out = np.zeros(int(starts[-1]), dtype=np.uint8)
    prefix = np.empty((n, 2), dtype=">i4")
    prefix[:, 0] = 4 + h_len + b_len
    prefix[:, 1] = (JSON << 24) | h_len
    scatter_pieces(out, starts[:-1], prefix.view(np.uint8).reshape(-1), np.arange(n + 1, dtype=np.int64) * 8)
    h_data = np.frombuffer(headers.buffers()[2], dtype=np.uint8)
    scatter_pieces(out, starts[:-1] + 8, h_data, h_off)
    b_buf = body.buffers()[2]
    if b_buf is not None:
        scatter_pieces(out, starts[:-1] + 8 + h_len, np.frombuffer(b_buf, dtype=np.uint8), b_off)
    return EncodedFrames(out, starts)
