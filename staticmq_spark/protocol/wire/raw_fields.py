"""Protocol-buffer wire fields by hand, for the messages whose big bytes fields are written and
read without copies (StageRequest rows, PullResponse batches): tags and lengths, and a walk over
the fields of an encoded message that yields where each one lies."""

from __future__ import annotations

from collections.abc import Iterator

from staticmq_spark.errors import InvalidArgumentError

VARINT, I64, LEN, I32 = 0, 1, 2, 5


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_head(number: int, length: int) -> bytes:
    """Tag and length of a length-delimited field."""
    return varint(number << 3 | LEN) + varint(length)


def fields(view: memoryview, pos: int, end: int, what: str = "message") -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, start of the field, start of its value, end) of each field of
    the message encoded in view[pos:end]."""
    while pos < end:
        start = pos
        key, pos = read_varint(view, pos, end, what)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise InvalidArgumentError(f"malformed {what}: field number 0 at byte {start}")
        value_start = pos
        if wire_type == VARINT:
            _, pos = read_varint(view, pos, end, what)
        elif wire_type == LEN:
            length, value_start = read_varint(view, pos, end, what)
            pos = value_start + length
        elif wire_type in (I64, I32):
            pos += 8 if wire_type == I64 else 4
        else:
            raise InvalidArgumentError(f"malformed {what}: unsupported wire type {wire_type} at byte {start}")
        if pos > end:
            raise InvalidArgumentError(f"malformed {what}: field {number} at byte {start} runs past its end")
        yield number, wire_type, start, value_start, pos


def read_varint(view: memoryview, pos: int, end: int, what: str = "message") -> tuple[int, int]:
    value = shift = 0
    while pos < end and shift < 64:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise InvalidArgumentError(f"malformed {what}: truncated or overlong varint before byte {pos}")


def split_batch(
    raw: bytes, batch_field: int, data_field: int, sizes_field: int, what: str
) -> tuple[bytes, memoryview, memoryview]:
    """An encoded message with one MessageBatch field, as (the other fields re-encoded, the batch's
    data, the batch's sizes): the batch stays in `raw` (views, no copy)."""
    view = memoryview(raw)
    head_parts: list[memoryview] = []
    data: memoryview = view[:0]
    sizes: memoryview = view[:0]
    for number, wire_type, start, value_start, end in fields(view, 0, len(view), what):
        if number == batch_field and wire_type == LEN:
            for inner, inner_type, _, lo, hi in fields(view, value_start, end, what):
                if inner == data_field and inner_type == LEN:
                    data = view[lo:hi]
                elif inner == sizes_field and inner_type == LEN:
                    sizes = view[lo:hi]
        else:
            head_parts.append(view[start:end])
    return b"".join(head_parts), data, sizes
