"""The one pull status every backend answers with: defined in the pure protocol layer
(staticmq_spark.protocol.pull_status, which the broker uses too) and re-exported here."""

from __future__ import annotations

from staticmq_spark.protocol.pull_status import PullStatus

__all__ = ["PullStatus"]
