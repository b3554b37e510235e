"""An in-memory backend with real static-topic semantics: a test seam (like httpx's MockTransport),
not a product backend. `MemoryCluster(NAME)` registers itself so that `memory://NAME` reaches it
(`open_backend`, `shared_backend`); it is unregistered by `close()`."""

from staticmq_spark.backends.memory.backend import MemoryAdmin, MemoryBackend, MemoryReader, MemorySink
from staticmq_spark.backends.memory.cluster import CLUSTERS, MemoryBroker, MemoryCluster, PhysicalQueue, Stored

__all__ = [
    "CLUSTERS",
    "MemoryAdmin",
    "MemoryBackend",
    "MemoryBroker",
    "MemoryCluster",
    "MemoryReader",
    "MemorySink",
    "PhysicalQueue",
    "Stored",
]
