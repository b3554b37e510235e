"""How fast can any sink on Apache RocketMQ 5.5 go here? `python -m bench.rocketmq_ceiling` (its __main__).

`add_best` and `table` (the report, `bench.rocketmq_ceiling.report`) are exported here too."""

from bench.rocketmq_ceiling.report import add_best, table

__all__ = ["add_best", "table"]
