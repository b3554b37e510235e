"""The RocketMQ client instance's pure parts: the one rule of which failures are retried, and the
route codec it caches (every broker address by broker id, each broker's queue data)."""

from __future__ import annotations

import json

from staticmq_spark.backends.rocketmq.client_instance import retriable
from staticmq_spark.backends.rocketmq.wire.codes import ResponseCode
from staticmq_spark.backends.rocketmq.wire.remoting import RocketMQError
from staticmq_spark.backends.rocketmq.wire.routes import parse_cluster, parse_route
from staticmq_spark.errors import BrokerUnavailableError, InvalidArgumentError, NotLeaderError


def test_the_rocketmq_retry_rule_takes_system_error_and_the_error_trees_transient_failures() -> None:
    assert retriable(RocketMQError("cannot find addr", ResponseCode.SYSTEM_ERROR))
    assert retriable(BrokerUnavailableError("down")) and retriable(NotLeaderError("moved"))
    assert not retriable(RocketMQError("no permission", ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST))
    assert not retriable(InvalidArgumentError("bad"))


def test_a_route_keeps_every_broker_address_by_id_and_each_brokers_queue_data() -> None:
    body = json.dumps(
        {
            "brokerDatas": [
                {"brokerName": "a", "brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}},
                {"brokerName": "b", "brokerAddrs": {"1": "10.0.0.4:10911"}},  # its master is gone
            ],
            "queueDatas": [
                {"brokerName": "a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6},
                {"brokerName": "b", "readQueueNums": 2, "writeQueueNums": 0, "perm": 4},
            ],
        }
    ).encode()
    route = parse_route("t", body)
    assert route.addresses == {"a": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}, "b": {1: "10.0.0.4:10911"}}
    assert route.masters == {"a": "10.0.0.1:10911"}
    assert (route.queues["a"].write_queues, route.queues["b"].read_queues, route.queues["b"].perm) == (4, 2, 4)
    assert not route.is_static


def test_the_broker_table_keeps_every_broker_address_by_id() -> None:
    body = json.dumps(
        {"brokerAddrTable": {"a": {"brokerName": "a", "brokerAddrs": {"0": "h:1", "2": "h:3"}}}, "clusterAddrTable": {}}
    ).encode()
    assert parse_cluster(body) == {"a": {0: "h:1", 2: "h:3"}}
