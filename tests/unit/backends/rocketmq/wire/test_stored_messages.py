"""RocketMQ's stored-message format (a pull answer's body) decoded into Arrow columns: the records
as RocketMQ's CommitLog writes them, their properties as RocketMQ reads them, UNIQ_KEYs, refusals."""

from __future__ import annotations

import socket
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from staticmq_spark.backends.rocketmq.wire.frames import FrameError
from staticmq_spark.backends.rocketmq.wire.remoting import encode_properties
from staticmq_spark.backends.rocketmq.wire.stored_messages import (
    MAGIC_V1,
    MAGIC_V2,
    SYSTEM_PROPERTIES,
    decode_stored,
    stored_uniq_keys,
)
from tests.support.fresh_interpreter import imports_pandas


def stored_record(
    body: bytes,
    props: str,
    *,
    queue_offset: int = 0,
    topic: str = "orders",
    sys_flag: int = 0,
    v6: bool = False,
    magic: int = MAGIC_V1,
    born: int = 1_000,
    stored: int = 2_000,
) -> bytes:
    """One record as RocketMQ's CommitLog writes it (MessageDecoder's layout)."""
    flag = sys_flag | (0x10 | 0x20 if v6 else 0)
    host = (socket.inet_pton(socket.AF_INET6, "::1") if v6 else socket.inet_aton("127.0.0.1")) + struct.pack(
        ">i", 10911
    )
    topic_raw = topic.encode()
    topic_part = (
        struct.pack(">h", len(topic_raw)) if magic == MAGIC_V2 else struct.pack(">b", len(topic_raw))
    ) + topic_raw
    props_raw = props.encode()
    rest = (
        struct.pack(">Iiiqqiq", zlib.crc32(body), 3, 0, queue_offset, 999, flag, born)
        + host
        + struct.pack(">q", stored)
        + host
        + struct.pack(">iq", 0, 0)
        + struct.pack(">i", len(body))
        + body
        + topic_part
        + struct.pack(">h", len(props_raw))
        + props_raw
    )
    return struct.pack(">ii", 8 + len(rest), magic) + rest


def test_stored_messages_decode_into_columns() -> None:
    props = encode_properties({"KEYS": "user-1", "TAGS": "t", "UNIQ_KEY": "u", "color": "red"})
    body = stored_record(b"hello", props, queue_offset=4) + stored_record(b"", "WAIT\x01true\x02", queue_offset=5)
    got = decode_stored(body)
    assert got.queue_offsets.tolist() == [4, 5]
    assert got.store_timestamps.tolist() == [2000, 2000]
    cols = got.columns.to_pydict()
    assert cols["key"] == ["user-1", None]
    assert cols["tags"] == ["t", None]
    assert cols["body"] == [b"hello", b""]
    assert cols["properties"] == [[("color", "red")], []]
    assert cols["born_timestamp"] == [1000, 1000]


def test_stored_messages_with_ipv6_hosts_long_topics_and_zlib_bodies_decode() -> None:
    packed = zlib.compress(b"x" * 5000)
    body = stored_record(packed, "KEYS\x01k\x02", sys_flag=0x1, v6=True, magic=MAGIC_V2, topic="t" * 200)
    got = decode_stored(body)
    assert got.columns.column("body").to_pylist() == [b"x" * 5000]
    assert got.columns.column("key").to_pylist() == ["k"]


def _properties_as_rocketmq_reads_them(props: str) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    """The oracle: MessageDecoder.string2messageProperties, entry by entry, in plain Python."""
    found: dict[str, str] = {}
    user: list[tuple[str, str]] = []
    for entry in props.split("\x02"):
        if "\x01" not in entry:
            continue
        name, value = entry.split("\x01", 1)
        found[name] = value
        if name and name not in SYSTEM_PROPERTIES:
            user.append((name, value))
    return found.get("KEYS") or None, found.get("TAGS") or None, user


_piece = st.lists(
    st.sampled_from(["a", "é", "\x01", "\x02", "KEYS", "TAGS", "UNIQ_KEY", "x\x01", "日"]), max_size=4
).map("".join)
_entry = st.one_of(
    st.tuples(st.sampled_from(["KEYS", "TAGS", "WAIT", "UNIQ_KEY", "color", "", "k\x01"]), _piece).map(
        lambda nv: f"{nv[0]}\x01{nv[1]}"
    ),
    _piece,  # an entry that may hold no \x01 at all
)
_props = st.lists(_entry, max_size=6).map("\x02".join) | st.lists(_entry, max_size=6).map(
    lambda es: "".join(e + "\x02" for e in es)
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.binary(max_size=40), _props, st.booleans(), st.booleans()),
        min_size=1,
        max_size=8,
    )
)
def test_stored_messages_decode_every_records_properties_as_rocketmq_reads_them(
    records: list[tuple[bytes, str, bool, bool]],
) -> None:
    body = b"".join(
        stored_record(b, p, queue_offset=i, v6=v6, magic=MAGIC_V2 if v2 else MAGIC_V1)
        for i, (b, p, v6, v2) in enumerate(records)
    )
    got = decode_stored(body).columns.to_pydict()
    expected = [_properties_as_rocketmq_reads_them(p) for _, p, _, _ in records]
    assert got["key"] == [k for k, _, _ in expected]
    assert got["tags"] == [t for _, t, _ in expected]
    assert got["properties"] == [u for _, _, u in expected]
    assert got["body"] == [b for b, _, _, _ in records]
    without = decode_stored(body, properties=False).columns.to_pydict()
    assert without["key"] == got["key"] and without["properties"] == [[] for _ in records]


def test_stored_messages_whose_bodies_hold_the_magic_word_decode_in_order() -> None:
    """The record chain is found by scanning for the magic word; a body holding those bytes by
    chance must not start a record."""
    fake = stored_record(b"inner", "KEYS\x01fake\x02")
    for keys in (["k0", "k1", "k2"], ["k", "kk", "kkk"]):  # records of one size, and of three
        body = b"".join(stored_record(fake + b"tail", f"KEYS\x01{k}\x02", queue_offset=i) for i, k in enumerate(keys))
        got = decode_stored(body)
        assert got.queue_offsets.tolist() == [0, 1, 2]
        assert got.columns.column("key").to_pylist() == keys
        assert got.columns.column("body").to_pylist() == [fake + b"tail"] * 3


def test_a_rocketmq_read_tasks_decode_path_imports_no_pandas() -> None:
    body = b"".join(
        stored_record(b"v", f"KEYS\x01k{i}\x02TAGS\x01t\x02UNIQ_KEY\x01u{i}\x02color\x01red\x02", queue_offset=i)
        for i in range(3)
    )
    code = (
        "import sys\n"
        "from staticmq_spark.backends.rocketmq.wire.stored_messages import decode_stored\n"
        "from staticmq_spark.source.schema import arrow_schema, to_spark_batch\n"
        f"m = decode_stored({body!r})\n"
        "b = to_spark_batch(m, topic='t', logic_queue=0, offset_delta=5, bname='b', schema=arrow_schema(True),\n"
        "                   include_properties=True)\n"
        "assert b.num_rows == 3 and b.column('key').to_pylist() == ['k0', 'k1', 'k2'], b\n"
    )
    assert not imports_pandas(code)


def test_a_corrupt_pulled_body_is_refused() -> None:
    good = stored_record(b"a", "")
    with pytest.raises(FrameError, match="corrupt"):
        decode_stored(good[:-3])
    with pytest.raises(FrameError, match="magic"):
        decode_stored(good[:4] + b"\0\0\0\0" + good[8:])


def test_stored_uniq_keys_reads_each_records_uniq_key_system_property_not_a_user_value() -> None:
    body = (
        stored_record(b"a", "KEYS\x01k\x02UNIQ_KEY\x01ABC00000001\x02WAIT\x01true\x02")
        + stored_record(b"b", "UNIQ_KEY\x01FIRST\x02", v6=True, magic=MAGIC_V2)
        + stored_record(b"c", "KEYS\x01k\x02my_UNIQ_KEY\x01user\x02")
        + stored_record(b"d", "")
    )
    assert stored_uniq_keys(body).to_pylist() == ["ABC00000001", "FIRST", None, None]
