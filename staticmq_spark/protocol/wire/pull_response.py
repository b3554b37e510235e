"""PullResponse on the wire, its batch neither copied into a message nor out of one.

The broker writes the answer by hand around the rows it read (`encode_pull_response`: one copy,
into the answer), where protobuf would copy them into the message and again into its
serialization; a reader takes the rows back as views of the received bytes
(`decode_pull_response`). Both follow the protobuf wire format, so either side interoperates with
plain `pb.PullResponse` serialization.
"""

from __future__ import annotations

from staticmq_spark.protocol.pb import staticmq_pb2 as pb
from staticmq_spark.protocol.wire.raw_fields import field_head, split_batch

_BATCH_FIELD = pb.PullResponse.DESCRIPTOR.fields_by_name["batch"].number
_DATA_FIELD = pb.MessageBatch.DESCRIPTOR.fields_by_name["data"].number
_SIZES_FIELD = pb.MessageBatch.DESCRIPTOR.fields_by_name["sizes"].number
PULL_METHOD = f"/{pb.DESCRIPTOR.services_by_name['Broker'].full_name}/Pull"


def encode_pull_response(head: pb.PullResponse, data: bytes | memoryview, sizes: bytes) -> bytes:
    """`head` (a PullResponse without batch) plus a batch of `data` and `sizes`; parses exactly
    like `pb.PullResponse(..., batch=pb.MessageBatch(data=data, sizes=sizes))`."""
    if not data and not sizes:
        return head.SerializeToString()
    sizes_part = field_head(_SIZES_FIELD, len(sizes)) + sizes
    data_head = field_head(_DATA_FIELD, len(data))
    batch_head = field_head(_BATCH_FIELD, len(sizes_part) + len(data_head) + len(data))
    return b"".join([head.SerializeToString(), batch_head, sizes_part, data_head, data])


def decode_pull_response(raw: bytes) -> tuple[pb.PullResponse, memoryview, memoryview]:
    """A serialized PullResponse as (its other fields, the batch's data, the batch's sizes): the
    batch stays in `raw` (views, no copy)."""
    head, data, sizes = split_batch(raw, _BATCH_FIELD, _DATA_FIELD, _SIZES_FIELD, "PullResponse")
    return pb.PullResponse.FromString(head), data, sizes
