"""RocketMQ's subscription expression (`*`, or `TagA || TagB`): parsed and checked, nothing more.
Pure Python with no Arrow: the driver's options and a query's planning process need only this,
while applying a filter to Arrow columns and consume-queue codes is `tag_filter`'s."""

from __future__ import annotations

from dataclasses import dataclass

from staticmq_spark.errors import InvalidArgumentError

ALL = "*"
SEPARATOR = "||"


@dataclass(frozen=True, slots=True)
class TagFilter:
    """`tags` None: every message; else the messages whose tag is one of `tags`."""

    expression: str
    tags: frozenset[str] | None

    @property
    def takes_all(self) -> bool:
        return self.tags is None


EVERYTHING = TagFilter(ALL, None)


def parse_tag_expression(expression: str | None) -> TagFilter:
    """RocketMQ's TAG expression: empty or `*` takes everything; else tags joined by `||`
    (spaces around each tag ignored, as `FilterAPI.buildSubscriptionData` does)."""
    text = (expression or "").strip()
    if text in ("", ALL):
        return EVERYTHING
    tags = [t.strip() for t in text.split(SEPARATOR)]
    named = [t for t in tags if t]
    if not named:
        raise InvalidArgumentError(f"tag expression {expression!r} names no tag (use '*' for every message)")
    bad = [t for t in named if t == ALL or any(c in t for c in "|\x00")]
    if bad:
        raise InvalidArgumentError(f"tag expression {expression!r}: {bad[0]!r} is not a tag name")
    return TagFilter(text, frozenset(named))
