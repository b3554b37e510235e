"""`python -m staticmq_spark.cli` is the `staticmq` command (how LocalCluster starts processes)."""

from staticmq_spark.cli.main import main

raise SystemExit(main())
