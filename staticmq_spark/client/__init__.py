"""The staticmq Python client: the user's API on top of the backends (any cluster address)."""

from staticmq_spark.backends.types import AckResult, PopMessage, PullResult, PullStatus, SendResult
from staticmq_spark.client.admin import Admin
from staticmq_spark.client.exclusive_consumer import ExclusiveConsumer
from staticmq_spark.client.pop_consumer import PopConsumer
from staticmq_spark.client.producer import Producer
from staticmq_spark.client.pull_consumer import PullConsumer

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
