"""How fast can any sink on Apache RocketMQ 5.5 go here? `python -m bench.rocketmq_ceiling` (its __main__;
the report is `bench.rocketmq_ceiling.report`)."""
