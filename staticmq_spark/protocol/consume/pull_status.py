"""The one pull status, from a broker's store read to the client (RocketMQ's PullStatus
vocabulary). Its numbers are the wire enum's (`PullResponse.status`): a broker answers
`int(status)`, a receiver reads `PullStatus(response.status)`. RETRY_AT_NEXT is not on staticmq's
wire (only Apache RocketMQ answers it)."""

from __future__ import annotations

from enum import IntEnum


class PullStatus(IntEnum):
    FOUND = 0
    NO_NEW_MESSAGE = 1  # the offset is the queue's end: nothing yet
    OFFSET_MOVED = 2  # the offset is outside the queue; next_offset is where to go
    NOT_FOUND = 3  # static topics: the offset falls in no decided segment
    RETRY_AT_NEXT = 4  # nothing here (a hole between segments); read again at next_offset
