"""The staticmq Python client."""

from staticmq_spark.client.admin import Admin
from staticmq_spark.client.exclusive_consumer import ExclusiveConsumer
from staticmq_spark.client.pop_consumer import PopConsumer
from staticmq_spark.client.pop_messages import AckResult, PopMessage
from staticmq_spark.client.producer import Producer
from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.client.results import PullResult, SendResult
from staticmq_spark.cluster.status import PullStatus

__all__ = [
    "AckResult",
    "Admin",
    "ExclusiveConsumer",
    "PopConsumer",
    "PopMessage",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "SendResult",
]
