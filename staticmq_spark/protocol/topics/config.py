"""The topic configuration value shared by broker, name server and clients (its wire form: wire/topic_config.py)."""

from __future__ import annotations

from dataclasses import dataclass

PERM_READ = 4
PERM_WRITE = 2
PERM_READ_WRITE = PERM_READ | PERM_WRITE
ORDERS = ("", "strict", "best-tried")


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    read_queues: int
    write_queues: int
    perm: int = PERM_READ_WRITE
    is_static: bool = False
    uid: int = 0
    order: str = ""
    total_queues: int = 0  # static topics: number of logic queues

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)
