"""RocketMQ remoting request and response codes (`RequestCode.java`, `ResponseCode.java`,
`RemotingSysResponseCode.java` of RocketMQ 5.5), and the one table from a response code to the
staticmq error it raises."""

from __future__ import annotations

from enum import IntEnum

from staticmq_spark.errors import (
    AccessDeniedError,
    BrokerUnavailableError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    NotLeaderError,
    StaticMQError,
    TopicExistsError,
    TopicNotFoundError,
)


class RequestCode(IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_BROKER_CONFIG = 26
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    END_TRANSACTION = 37
    GET_ALL_CONSUMER_OFFSET = 43
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_TOPIC_STATS_INFO = 202
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    GET_TOPIC_CONFIG = 351
    LITE_PULL_MESSAGE = 361
    UPDATE_AND_CREATE_STATIC_TOPIC = 513
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    BATCH_ACK_MESSAGE = 200151


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
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    INVALID_PARAMETER = 29
    NO_MESSAGE = 208
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    FLOW_CONTROL = 215
    NOT_LEADER_FOR_QUEUE = 501
    ILLEGAL_OPERATION = 604
    GO_AWAY = 1500


# A send answered with one of these stored the message, only its replication or flush is late.
STORED_DEGRADED = frozenset(
    {ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT}
)

# The staticmq error each refusal raises (retriable ones are those whose class is retriable);
# a code not listed (SYSTEM_ERROR, SUBSCRIPTION_GROUP_NOT_EXIST, ...) raises RocketMQError with the code,
# which callers that can act on it (create the group, retry a forwarding leader) look at.
ERRORS: dict[ResponseCode, type[StaticMQError]] = {
    ResponseCode.SYSTEM_BUSY: BrokerUnavailableError,
    ResponseCode.SERVICE_NOT_AVAILABLE: BrokerUnavailableError,
    ResponseCode.GO_AWAY: BrokerUnavailableError,
    ResponseCode.FLOW_CONTROL: BrokerUnavailableError,
    ResponseCode.POLLING_FULL: BrokerUnavailableError,
    ResponseCode.NOT_LEADER_FOR_QUEUE: NotLeaderError,
    ResponseCode.NO_PERMISSION: AccessDeniedError,
    ResponseCode.TOPIC_NOT_EXIST: TopicNotFoundError,
    ResponseCode.TOPIC_EXIST_ALREADY: TopicExistsError,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: NotFoundError,
    ResponseCode.INVALID_PARAMETER: InvalidArgumentError,
    ResponseCode.MESSAGE_ILLEGAL: InvalidArgumentError,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: InvalidArgumentError,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: InvalidArgumentError,
    ResponseCode.ILLEGAL_OPERATION: ConflictError,
}
# Worth another try on the same or a refreshed route.
RETRIABLE = frozenset(code for code, error in ERRORS.items() if error.retriable)


def code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"


def error_for(code: int) -> type[StaticMQError] | None:
    """The staticmq error a refusal with `code` raises (None: RocketMQError with the code)."""
    try:
        return ERRORS.get(ResponseCode(code))
    except ValueError:
        return None
