"""How Spark's Python worker processes run staticmq's tasks: the worker site (sitecustomize, the warm
query runner), the preload of the daemons and the cyclic GC settings of task workers."""
