"""The one context-manager pair of the client objects: `with obj:` closes `obj` at the end."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self


class Closeable(ABC):
    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
