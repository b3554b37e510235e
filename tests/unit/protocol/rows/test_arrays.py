"""`protocol.arrays`: Arrow arrays on numpy buffers, equal to what `pa.array` builds, and a read
task's decode path that never imports pandas (which `pa.array`, `np.asarray` and `to_numpy` do)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from staticmq_spark.protocol.rows import arrays
from staticmq_spark.protocol.rows.encode import encode_columns
from tests.support.fresh_interpreter import imports_pandas


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.float64])
def test_numbers_equal_pa_array_also_for_a_strided_view(dtype: type) -> None:
    values = np.arange(10, dtype=dtype)[::3]
    assert arrays.numbers(values).equals(pa.array(values))
    assert arrays.numbers(values[:0]).equals(pa.array(values[:0]))


def test_flags_and_strings_equal_pa_array() -> None:
    mask = np.array([True, False, True, True, False, False, False, True, True], dtype=bool)
    assert arrays.flags(mask).equals(pa.array(mask))
    words = ["", "KEYS", "日本", "a\x01b"]
    assert arrays.strings(words).equals(pa.array(words, pa.string()))
    assert arrays.strings([]).equals(pa.array([], pa.string()))
    assert arrays.empty(pa.binary()).equals(pa.array([], pa.binary()))
    assert arrays.empty_maps(3).equals(pa.array([[], [], []], pa.map_(pa.string(), pa.string())))


def test_int64_values_view_a_slice_and_refuse_nulls_or_another_type() -> None:
    column = pa.array([5, 6, 7, 8], pa.int64()).slice(1, 2)
    assert arrays.int64_values(column).tolist() == [6, 7]
    with pytest.raises(TypeError, match="without nulls"):
        arrays.int64_values(pa.array([1, None], pa.int64()))
    with pytest.raises(TypeError, match="int32"):
        arrays.int64_values(pa.array([1], pa.int32()))


def test_flag_values_unpack_a_sliced_bool_array_and_refuse_nulls() -> None:
    mask = pa.array([True, False, True, True, False, False, False, True, True, False, True])
    assert arrays.flag_values(mask.slice(3, 7)).tolist() == mask.slice(3, 7).to_pylist()
    with pytest.raises(TypeError, match="without nulls"):
        arrays.flag_values(pa.array([True, None]))


def test_a_read_tasks_decode_path_imports_no_pandas() -> None:
    packed = encode_columns([b"a", b"b"], key=["k", None], tags=["t", None], properties=[{"p": "v"}, None])
    code = (
        "import sys, numpy as np\n"
        "from staticmq_spark.backends.types import MessageColumns, pulled_columns\n"
        "from staticmq_spark.protocol.rows.codec import PackedBatch\n"
        "from staticmq_spark.protocol.rows.decode import decode_batch\n"
        "from staticmq_spark.protocol.consume.tag_expression import parse_tag_expression\n"
        "from staticmq_spark.protocol.consume.tag_filter import tag_matches\n"
        "from staticmq_spark.source.schema import arrow_schema, to_spark_batch\n"
        f"batch = PackedBatch({packed.data_bytes()!r}, np.array({packed.sizes.tolist()!r}, dtype=np.int32))\n"
        "cols = MessageColumns(decode_batch(batch), np.arange(2, dtype=np.int64), np.arange(2, dtype=np.int64))\n"
        "from staticmq_spark.protocol.rows import arrays\n"
        "arrays.flag_values(tag_matches(parse_tag_expression('t || u'), cols.columns.column('tags')))\n"
        "pulled_columns(cols, 10)\n"
        "to_spark_batch(cols, topic='t', logic_queue=0, offset_delta=10, bname='b', schema=arrow_schema(True),\n"
        "               include_properties=True)\n"
    )
    assert not imports_pandas(code)


def test_valid_and_int64_filled_follow_nulls_slices_and_integer_types() -> None:
    column = pa.array([1, None, 3, None, 5, 6, None, 8, 9, None], pa.int32()).slice(1, 8)
    assert arrays.valid(column).tolist() == column.is_valid().to_pylist()
    assert arrays.int64_filled(column, -1).tolist() == column.fill_null(-1).to_pylist()
    assert arrays.valid(pa.nulls(3)).tolist() == [False, False, False]
    assert arrays.int64_filled(pa.chunked_array([[1], [None]], pa.int64()), 7).tolist() == [1, 7]
    with pytest.raises(TypeError, match="integer"):
        arrays.int64_filled(pa.array(["1"]), 0)


def test_large_binary_helpers_equal_pa_array_and_fill_null() -> None:
    items = [b"", b"\x00a", b"xyz"]
    assert arrays.large_binaries(items).equals(pa.array(items, pa.large_binary()))
    with_nulls = pa.array([b"a", None, b"c"], pa.large_binary())
    assert arrays.large_binary_nulls_empty(with_nulls).equals(with_nulls.fill_null(b""))
    assert arrays.empty_large_binaries(2).equals(pa.array([b"", b""], pa.large_binary()))


def test_a_sink_tasks_encode_and_routing_path_imports_no_pandas() -> None:
    """What a sink task does with a batch before it reaches the wire: queue targets from keys and
    an explicit queueId (with nulls), then the packed rows with tags, properties and born times."""
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(["k1", None, "k3"], pa.string()),
            "value": pa.array([b"a", b"b", b""], pa.binary()),
            "tags": pa.array(["t", None, "u"], pa.string()),
            "properties": pa.array([{"p": "v"}, None, {"q": None}], pa.map_(pa.string(), pa.string())),
            "queueId": pa.array([None, 1, None], pa.int32()),
            "bornTimestamp": pa.array([1, None, 3], pa.timestamp("ms")),
        }
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as stream:
        stream.write_batch(batch)
    code = (
        "import sys, pyarrow as pa\n"
        "import staticmq_spark.backends.staticmq.staging\n"
        "from staticmq_spark.protocol.rows.encode import encode_columns_to_buffer\n"
        "from staticmq_spark.sink.placement import place\n"
        f"rb = pa.ipc.open_stream({sink.getvalue().to_pybytes()!r}).read_next_batch()\n"
        "rows = place('t', 4, 0, rb, 0)\n"
        "data, sizes = encode_columns_to_buffer(rows.value, key=rows.key, tags=rows.tags,\n"
        "    properties=rows.properties, born_timestamp=rb.column('bornTimestamp'))\n"
        "assert len(sizes) == 3 and rows.targets[1] == 1, (rows.targets, sizes)\n"
    )
    assert not imports_pandas(code)


def test_repeated_values_and_scalars_equal_what_pa_array_and_pa_scalar_build() -> None:
    for value, n in (("ab", 3), ("", 2), ("日", 2), ("x", 0)):
        assert arrays.repeated(value, n).equals(pa.array([value] * n, pa.string()))
    assert arrays.repeated(b"\x00z", 2).equals(pa.array([b"\x00z"] * 2, pa.binary()))
    assert arrays.repeated(b"", 2).equals(pa.array([b""] * 2, pa.binary()))
    assert arrays.scalar("q").equals(pa.scalar("q")) and arrays.scalar(False).equals(pa.scalar(False))
