"""The one cluster-access layer: an interface (`ClusterAccess`) and its backends, picked by address."""

from staticmq_spark.cluster.access import Capabilities, ClusterAccess, PhysicalRead, capabilities_of, open_cluster
from staticmq_spark.cluster.address import ClusterAddress, parse_address
from staticmq_spark.cluster.messages import MessageColumns
from staticmq_spark.cluster.state import BrokerState
from staticmq_spark.cluster.status import PullStatus

__all__ = [
    "BrokerState",
    "Capabilities",
    "ClusterAccess",
    "ClusterAddress",
    "MessageColumns",
    "PhysicalRead",
    "PullStatus",
    "capabilities_of",
    "open_cluster",
    "parse_address",
]
