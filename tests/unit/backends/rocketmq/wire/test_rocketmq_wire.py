"""RocketMQ's wire pieces as pure functions: frames, fastjson bodies, batch encoding, routes with
static mappings, ACL signatures, segment fencing, address parsing (stored messages:
test_stored_messages.py)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from staticmq_spark.backends import BrokerState, parse_address
from staticmq_spark.backends.rocketmq.reader import fence_segments
from staticmq_spark.backends.rocketmq.sinks.direct_sink import ROW_ID, row_ids, with_row_ids
from staticmq_spark.backends.rocketmq.wire import fastjson
from staticmq_spark.backends.rocketmq.wire.acl import sign_request
from staticmq_spark.backends.rocketmq.wire.batch_encode import (
    SLICED_PIECE_BYTES,
    encode_rows,
    properties_column,
    scatter_pieces,
    uniq_keys,
)
from staticmq_spark.backends.rocketmq.wire.connection import split_host_port
from staticmq_spark.backends.rocketmq.wire.frame_columns import encode_frames
from staticmq_spark.backends.rocketmq.wire.frames import FrameError, decode_frame, encode_request, frame_length
from staticmq_spark.backends.rocketmq.wire.routes import parse_mapping_detail, parse_route
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.mapping import MappingItem, TopicQueueMapping
from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.security.auth import Credentials
from tests.support.fresh_interpreter import imports_pandas


def test_request_frame_has_length_header_word_and_string_ext_fields() -> None:
    frame = encode_request(105, 7, {"topic": "orders", "lo": False, "queueId": 3, "skip": None}, b"xy")
    total, word = struct.unpack_from(">ii", frame)
    assert total == len(frame) - 4
    assert word >> 24 == 0
    header = json.loads(frame[8 : 8 + (word & 0xFFFFFF)])
    assert header["extFields"] == {"topic": "orders", "lo": "false", "queueId": "3"}
    assert header["opaque"] == 7 and header["language"] == "PYTHON" and header["version"] >= 401
    assert frame.endswith(b"xy")


def test_json_response_frame_decodes() -> None:
    header = json.dumps({"code": 0, "flag": 1, "opaque": 9, "extFields": {"offset": "12"}}).encode()
    cmd = decode_frame(struct.pack(">i", len(header)) + header + b"body")
    assert (cmd.code, cmd.opaque, cmd.is_response, cmd.ext, cmd.body) == (0, 9, True, {"offset": "12"}, b"body")


def test_rocketmq_binary_header_decodes() -> None:
    ext = {"nextBeginOffset": "10000"}
    ext_raw = b"".join(
        struct.pack(">h", len(k)) + k.encode() + struct.pack(">i", len(v)) + v.encode() for k, v in ext.items()
    )
    remark = b"OFFSET_FOUND_NULL"
    header = struct.pack(">hbhiii", 20, 0, 479, 5, 1, len(remark)) + remark + struct.pack(">i", len(ext_raw)) + ext_raw
    cmd = decode_frame(struct.pack(">i", (1 << 24) | len(header)) + header)
    assert (cmd.code, cmd.opaque, cmd.remark, cmd.ext) == (20, 5, "OFFSET_FOUND_NULL", ext)


@pytest.mark.parametrize("length", [0, 3, 129 * 1024 * 1024 + 1, 0x48545450])  # the last: "HTTP"
def test_frame_lengths_outside_the_limits_are_refused(length: int) -> None:
    with pytest.raises(FrameError, match="frame length"):
        frame_length(struct.pack(">i", length))


def test_frames_up_to_the_largest_pull_answer_a_broker_sends_are_read() -> None:
    """RocketMQ 5.5 answers a pull with up to 128 MiB of messages (MAX_PULL_MSG_SIZE), when its
    maxTransferBytesOnMessageInMemory allows it; RocketMQ's own client would refuse above 16 MiB."""
    assert frame_length(struct.pack(">i", 128 * 1024 * 1024 + 4096)) == 128 * 1024 * 1024 + 4096


def test_unknown_serialize_type_is_refused() -> None:
    with pytest.raises(FrameError, match="serialize type 7"):
        decode_frame(struct.pack(">i", 7 << 24))


def test_fastjson_bare_integer_keys_are_quoted_outside_strings() -> None:
    body = b'{"hostedQueues":{1:[{"bname":"a"}],-3:[]},"text":"{5:x}","brokerAddrs":{0:"h:1"}}'
    assert fastjson.loads(body) == {
        "hostedQueues": {"1": [{"bname": "a"}], "-3": []},
        "text": "{5:x}",
        "brokerAddrs": {"0": "h:1"},
    }


def test_route_of_a_static_topic_names_each_logic_queue_leader_newest_epoch_wins() -> None:
    body = json.dumps(
        {
            "brokerDatas": [
                {"brokerName": "broker-a", "brokerAddrs": {"0": "127.0.0.1:1"}},
                {"brokerName": "broker-b", "brokerAddrs": {"0": "127.0.0.1:2", "1": "127.0.0.1:3"}},
            ],
            "queueDatas": [],
            "topicQueueMappingByBroker": {
                "broker-a": {"bname": "broker-a", "epoch": 5, "totalQueues": 4, "currIdMap": {"0": 0, "1": 1}},
                "broker-b": {"bname": "broker-b", "epoch": 9, "totalQueues": 4, "currIdMap": {"1": 0, "2": 1, "3": 2}},
            },
        }
    ).encode()
    route = parse_route("orders", body)
    assert route.is_static and route.total_queues == 4
    assert route.leaders == {0: "broker-a", 1: "broker-b", 2: "broker-b", 3: "broker-b"}
    assert route.leader_addr(1) == ("broker-b", "127.0.0.1:2")


def test_mapping_detail_becomes_chains_oldest_first() -> None:
    detail = fastjson.loads(
        b'{"bname":"broker-b","epoch":7,"totalQueues":2,"hostedQueues":{0:[{"bname":"broker-a","gen":0,'
        b'"queueId":0,"logicOffset":0,"startOffset":0,"endOffset":-1},{"bname":"broker-b","gen":1,"queueId":3,'
        b'"logicOffset":-1,"startOffset":0,"endOffset":-1}]}}'
    )
    mapping = parse_mapping_detail("orders", detail)
    assert mapping.bname == "broker-b" and mapping.epoch == 7 and mapping.total_queues == 2
    assert [(i.bname, i.queue, i.gen, i.logic_offset) for i in mapping.hosted[0]] == [
        ("broker-a", 0, 0, 0),
        ("broker-b", 3, 1, -1),
    ]
    assert mapping.leads(0)


def test_old_segments_end_at_their_physical_max_offset() -> None:
    chain = (MappingItem(0, "broker-a", 0, 0), MappingItem(2, "broker-b", 1, 10000))
    mapping = TopicQueueMapping("orders", "broker-b", 1, 1, {0: chain})
    states = [
        BrokerState("broker-a", "h:1", None, "", None, {0: pb.QueueOffsets(queue_id=0, min_offset=0, max_offset=42)}),
        BrokerState("broker-b", "h:2", mapping, "", None, {2: pb.QueueOffsets(queue_id=2, max_offset=7)}),
    ]
    fenced = fence_segments(states)[1].mapping
    assert fenced is not None
    assert [i.end_offset for i in fenced.hosted[0]] == [42, -1]  # the leader stays open


def test_row_ids_are_added_to_each_rows_properties_and_win_over_a_users_own() -> None:
    props = pa.array(
        [[("a", "1"), (ROW_ID, "mine")], None, [], [("b", None)], [("c", "3")]], pa.map_(pa.string(), pa.string())
    ).slice(1)
    ids = row_ids("w", 7, 2, 10, 4)
    assert ids.to_pylist() == ["w:7:2:10", "w:7:2:11", "w:7:2:12", "w:7:2:13"]
    got = with_row_ids(props, ids).to_pylist()
    assert got == [
        [(ROW_ID, "w:7:2:10")],
        [(ROW_ID, "w:7:2:11")],
        [("b", None), (ROW_ID, "w:7:2:12")],
        [("c", "3"), (ROW_ID, "w:7:2:13")],
    ]
    whole = pa.array([[("a", "1"), (ROW_ID, "mine")]], pa.map_(pa.string(), pa.string()))
    assert with_row_ids(whole, row_ids("w", 0, 0, 0, 1)).to_pylist() == [[("a", "1"), (ROW_ID, "w:0:0:0")]]
    assert with_row_ids(None, ids[:2]).to_pylist() == [[(ROW_ID, "w:7:2:10")], [(ROW_ID, "w:7:2:11")]]


def test_uniq_keys_are_the_prefix_then_the_row_number_in_eight_hex_digits() -> None:
    rows = np.array([0, 1, 255, 0xABCDEF12], dtype=np.int64)
    assert uniq_keys("P1", rows).to_pylist() == [f"P1{i:08X}" for i in rows.tolist()]
    assert uniq_keys("P1", rows[:0]).to_pylist() == []


def test_a_rocketmq_sink_tasks_encode_path_imports_no_pandas() -> None:
    """Row ids, UNIQ_KEYs, the properties strings, half marks, the batch records and the per-row
    request frames of a sink task, in a fresh interpreter."""
    code = (
        "import sys, numpy as np, pyarrow as pa\n"
        "from staticmq_spark.backends.rocketmq.wire.batch_encode import encode_rows, properties_column, uniq_keys\n"
        "from staticmq_spark.backends.rocketmq.sinks.direct_sink import row_ids, with_row_ids\n"
        "from staticmq_spark.backends.rocketmq.wire.frame_columns import encode_frames\n"
        "from staticmq_spark.backends.rocketmq.sinks.transactions import half_properties\n"
        "from staticmq_spark.backends.targets import KEYLESS\n"
        "from staticmq_spark.protocol.rows import arrays\n"
        "props = pa.MapArray.from_arrays(arrays.numbers(np.array([0, 1, 1], dtype=np.int32)),\n"
        "    arrays.strings(['color']), arrays.strings(['red']))\n"
        "keys, tags = arrays.strings(['k1', '']), arrays.strings(['t', 'u'])\n"
        "user = with_row_ids(props, row_ids('w', 1, 0, 0, 2))\n"
        "props = properties_column(keys, tags, user, uniq_keys('T', np.arange(2)))\n"
        "marked = half_properties(props, 'G', 'x\\x01y\\x02')\n"
        "rows = encode_rows(arrays.repeated(b'body', 2), marked)\n"
        "frames = encode_frames(10, np.arange(2, dtype=np.int64), {'topic': 't'}, {'properties': marked})\n"
        "assert rows.count == 2 and len(frames.frames(0, 2)) > 0\n"
        "assert arrays.int64_filled(pa.nulls(2, pa.int32()), KEYLESS).tolist() == [KEYLESS, KEYLESS]\n"
    )
    assert not imports_pandas(code)


def test_batch_records_follow_message_decoder_encode_message() -> None:
    props = properties_column(
        pa.array(["k1", None]),
        pa.array([None, "tag"]),
        pa.array([[("a", "1")], None], pa.map_(pa.string(), pa.string())),
        pa.array(["U1", "U2"]),
    )
    assert props.to_pylist() == [
        "KEYS\x01k1\x02UNIQ_KEY\x01U1\x02WAIT\x01true\x02a\x011\x02",
        "TAGS\x01tag\x02UNIQ_KEY\x01U2\x02WAIT\x01true\x02",
    ]
    encoded = encode_rows(pa.array([b"body-1", b"b2"], pa.binary()), props)
    raw = encoded.body(0, 2)
    pos = 0
    for body, prop in zip([b"body-1", b"b2"], props.to_pylist(), strict=True):
        size, magic, crc, flag, blen = struct.unpack_from(">iiiii", raw, pos)
        assert (magic, crc, flag, blen) == (0, 0, 0, len(body))
        assert raw[pos + 20 : pos + 20 + blen] == body
        (plen,) = struct.unpack_from(">h", raw, pos + 20 + blen)
        assert raw[pos + 22 + blen : pos + 22 + blen + plen].decode() == prop
        assert size == 22 + blen + plen
        pos += size
    assert pos == len(raw)


def test_batches_split_into_requests_under_the_size_limit() -> None:
    props = properties_column(None, None, None, pa.array([str(i) for i in range(10)]))
    encoded = encode_rows(pa.array([b"x" * 100] * 10, pa.binary()), props)
    chunks = encoded.chunks(max_bytes=400)
    assert chunks[0][0] == 0 and chunks[-1][1] == 10
    assert all(encoded.starts[b] - encoded.starts[a] <= 400 for a, b in chunks)


def test_acl_signature_is_hmac_sha1_over_sorted_values_then_body() -> None:
    ext = {"topic": "orders", "queueId": "1"}
    sign_request(Credentials("ak", "sk"), ext, b"payload")
    content = "ak" + "1" + "orders"  # sorted keys: AccessKey, queueId, topic
    expected = base64.b64encode(hmac.new(b"sk", content.encode() + b"payload", hashlib.sha1).digest()).decode()
    assert ext["Signature"] == expected and ext["AccessKey"] == "ak"


@pytest.mark.parametrize(
    ("text", "scheme", "hosts"),
    [
        ("127.0.0.1:9876", "staticmq", ("127.0.0.1:9876",)),
        ("a:1; b:2", "staticmq", ("a:1", "b:2")),
        ("rocketmq://a:9876;b:9876", "rocketmq", ("a:9876", "b:9876")),
        ("ROCKETMQ://[::1]:9876", "rocketmq", ("[::1]:9876",)),
    ],
)
def test_addresses_parse_once_into_scheme_and_hosts(text: str, scheme: str, hosts: tuple[str, ...]) -> None:
    address = parse_address(text)
    assert (address.scheme, address.hosts) == (scheme, hosts)


@pytest.mark.parametrize("text", ["", "rocketmq://", "http://a:1", "a:99999", "a"])
def test_bad_addresses_name_what_is_wrong(text: str) -> None:
    with pytest.raises(InvalidOptionError, match="address"):
        parse_address(text)


def test_ipv6_broker_addresses_split() -> None:
    assert split_host_port("[::1]:10911") == ("::1", 10911)
    assert split_host_port("fe80::1:10911") == ("fe80::1", 10911)


def test_frames_encoded_as_columns_are_the_frames_encoded_one_by_one() -> None:
    """frame_columns.encode_frames: the same headers (escaped properties included) and bodies as
    frames.encode_request, every frame back to back with its length prefix."""
    props = ['KEYS\x01a "quoted"\\ key\x02', "TAGS\x01t\nline\x02", "", "UNIQ\x01é\x02"]
    bodies = [b"one", b"", b"\x00\x01binary", b"x" * 300]
    fixed = {"topic": "T", "queueId": 3, "lo": False}
    opaques = np.array([7, 8, 9, 2**31 - 1], dtype=np.int64)
    encoded = encode_frames(10, opaques, fixed, {"properties": pa.array(props)}, pa.array(bodies, pa.binary()))
    data = encoded.frames(0, 4)
    pos = 0
    for i in range(4):
        length = frame_length(data[pos : pos + 4])
        got = decode_frame(data[pos + 4 : pos + 4 + length])
        want_raw = encode_request(10, int(opaques[i]), {**fixed, "properties": props[i]}, bodies[i])
        want = decode_frame(want_raw[4:])
        assert (got.code, got.opaque, got.ext, got.body) == (want.code, want.opaque, want.ext, want.body)
        pos += 4 + length
    assert pos == len(data)


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 3 * SLICED_PIECE_BYTES), min_size=1, max_size=40),
    gap=st.integers(0, 9),
    skip=st.integers(0, 5),
)
def test_scatter_pieces_copies_each_piece_to_its_place_short_or_long(lengths: list[int], gap: int, skip: int) -> None:
    """Short pieces go through a per-byte index, long ones slice by slice: both put piece r of
    data[offsets[r]:offsets[r+1]] at out[dest[r]:] (offsets need not start at 0)."""
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64) + skip
    data = np.frombuffer(bytes(i % 251 for i in range(int(offsets[-1]))), dtype=np.uint8)
    dest = np.concatenate([[0], np.cumsum(np.asarray(lengths[:-1]) + gap)]).astype(np.int64)
    out = np.full(int(dest[-1] + lengths[-1] + 1), 255, dtype=np.uint8)
    scatter_pieces(out, dest, data, offsets)
    want = bytearray(b"\xff" * len(out))
    for at, a, b in zip(dest.tolist(), offsets[:-1].tolist(), offsets[1:].tolist(), strict=True):
        want[at : at + b - a] = bytes(data[a:b])
    assert out.tobytes() == bytes(want)
