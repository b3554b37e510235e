"""Realistic keyed events for the demo: page views of users, with a skewed popularity."""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field

PAGES = ["/", "/search", "/product", "/cart", "/checkout", "/help", "/account", "/deals"]


@dataclass
class EventLog:
    """What the generator produced, to verify the pipeline's output against."""

    views_per_user: Counter[str] = field(default_factory=Counter)
    sent: int = 0

    def record(self, users: list[str]) -> None:
        self.views_per_user.update(users)
        self.sent += len(users)


def page_views(n: int, users: int, rng: random.Random, start_ms: int) -> tuple[list[str], list[bytes]]:
    """n page views: (keys, JSON bodies). A few users are much more active (Zipf-like)."""
    weights = [1.0 / (i + 1) ** 0.8 for i in range(users)]
    chosen = rng.choices(range(users), weights=weights, k=n)
    keys = [f"user-{u:05d}" for u in chosen]
    bodies = [
        json.dumps(
            {"user": k, "page": rng.choice(PAGES), "ms": start_ms + i * 3, "dwell": rng.randint(1, 300)}
        ).encode()
        for i, k in enumerate(keys)
    ]
    return keys, bodies
