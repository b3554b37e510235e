"""RocketMQ remoting request and response codes (the subset staticmq speaks)."""

from __future__ import annotations

from enum import IntEnum


class RequestCode(IntEnum):
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    PULL_MESSAGE = 11
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    HEART_BEAT = 34
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    GET_TOPIC_CONFIG = 351


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    INVALID_PARAMETER = 29
    NOT_LEADER_FOR_QUEUE = 501
    GO_AWAY = 1500


# A send answered with one of these stored the message, only its replication or flush is late.
STORED_DEGRADED = frozenset(
    {ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT}
)
# Worth another try on the same or a refreshed route.
RETRIABLE = frozenset(
    {
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.NOT_LEADER_FOR_QUEUE,
        ResponseCode.GO_AWAY,
    }
)


def code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"
