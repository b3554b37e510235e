"""Tag filters: RocketMQ's expression parsed, the consume-queue tag codes broker_stub keeps, and a
filtered store read that reads only matching messages from the commit log, leaving gaps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from broker_stub.store.store_results import ReadStatus
from staticmq_spark.errors import InvalidArgumentError
from staticmq_spark.protocol.consume.tag_expression import parse_tag_expression
from staticmq_spark.protocol.consume.tag_filter import (
    NO_TAG,
    UNKNOWN,
    filter_codes,
    kept_by_codes,
    tag_codes,
    tag_matches,
)
from staticmq_spark.protocol.rows.encode import encode_messages
from tests.support.fresh_interpreter import imports_pandas
from tests.unit.broker_stub.store.test_message_store import bodies, open_store

KEYED_AND_TAGGED = encode_messages([b"a", b"b", b"c"], keys=["k1", None, "k3"], tags=["TagA", None, ""])


@pytest.mark.parametrize("expression", [None, "", "*", "  *  "])
def test_an_empty_or_star_expression_takes_every_message(expression: str | None) -> None:
    assert parse_tag_expression(expression).takes_all


def test_tags_joined_by_double_bars_are_trimmed_and_empty_ones_ignored() -> None:
    f = parse_tag_expression(" TagA ||TagB|| ||TagA ")
    assert f.tags == frozenset({"TagA", "TagB"})
    assert tag_matches(f, pa.array(["TagA", "TagC", None, "TagB", ""])).to_pylist() == [True, False, False, True, False]


@pytest.mark.parametrize("bad", ["||", " || || ", "TagA || *", "a|b"])
def test_an_expression_naming_no_valid_tag_is_refused(bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="tag"):
        parse_tag_expression(bad)


def test_codes_tell_no_tag_from_a_tag_and_a_filter_keeps_entries_without_a_code() -> None:
    codes = tag_codes(pa.array(["TagA", None, "", "TagB", "TagA"]))
    assert codes[1] == codes[2] == NO_TAG
    assert codes[0] == codes[4] != codes[3]
    assert (codes[[0, 3]] < 0).all(), "a tag's code has the sign bit set: never UNKNOWN or NO_TAG"
    wanted = filter_codes(parse_tag_expression("TagA"))
    entries = np.array([codes[0], NO_TAG, UNKNOWN, codes[3]], dtype=np.int32)
    assert kept_by_codes(entries, wanted).tolist() == [True, False, True, False]


def test_codes_of_sliced_and_large_binary_tags_equal_those_of_plain_strings() -> None:
    plain = tag_codes(pa.array(["x", "TagA", None, "", "TagB"]))
    assert tag_codes(pa.array(["TagA", None, "", "TagB"], pa.large_binary())).tolist() == plain[1:].tolist()
    assert tag_codes(pa.array(["x", "TagA", None, "", "TagB"]).slice(1)).tolist() == plain[1:].tolist()
    assert tag_codes(pa.chunked_array([["x", "TagA"], [None, "", "TagB"]])).tolist() == plain.tolist()


def test_a_brokers_append_path_does_not_import_pandas() -> None:
    """The codes a broker computes for every stored batch (under its append lock) use no compute
    kernel with a Python scalar: pyarrow would import pandas for it, half a second of the first
    send to each broker process."""
    data, sizes = bytes(KEYED_AND_TAGGED.data), KEYED_AND_TAGGED.sizes.tolist()
    code = (
        "import numpy as np\n"
        "from staticmq_spark.protocol.rows.codec import PackedBatch\n"
        "from staticmq_spark.protocol.rows.decode import tags_of, validate_batch\n"
        "from staticmq_spark.protocol.consume.tag_filter import tag_codes\n"
        f"batch = PackedBatch({data!r}, np.array({sizes}, np.int32))\n"
        "validate_batch(batch, 1 << 20)\n"
        "assert len(tag_codes(tags_of(batch))) == 3\n"
    )
    assert not imports_pandas(code)


def test_a_filtered_read_reads_only_matching_messages_and_reports_their_offsets(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    n = 100
    tags = ["hit" if i % 10 == 3 else f"miss{i % 4}" for i in range(n)]
    store.append("t", 0, encode_messages([f"m{i}".encode() for i in range(n)], tags=tags))
    codes = filter_codes(parse_tag_expression("hit"))
    result = store.read("t", 0, 0, 4, 1 << 20, codes)
    assert result.status is ReadStatus.FOUND
    assert result.offsets is not None and result.offsets.tolist() == [3, 13, 23, 33]
    assert bodies(result) == [b"m3", b"m13", b"m23", b"m33"], "only the matching rows were read"
    assert result.next_offset == 34, "stopped at max_messages: go on after the last one taken"
    rest = store.read("t", 0, 34, 100, 1 << 20, codes)
    assert rest.offsets is not None and rest.offsets.tolist() == [43, 53, 63, 73, 83, 93]
    assert rest.next_offset == 100, "every entry looked at after the last match is skipped too"
    none = store.read("t", 0, 94, 1, 1 << 20, codes)
    assert (none.status, none.next_offset) == (ReadStatus.NO_MATCHED_MESSAGE, 100)
    store.close()
