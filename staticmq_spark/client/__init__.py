"""The staticmq Python client."""

from staticmq_spark.client.admin import Admin
from staticmq_spark.client.producer import Producer
from staticmq_spark.client.pull_consumer import PullConsumer
from staticmq_spark.client.results import PullResult, PullStatus, SendResult
from staticmq_spark.testing import LocalCluster

__all__ = ["Admin", "LocalCluster", "Producer", "PullConsumer", "PullResult", "PullStatus", "SendResult"]
