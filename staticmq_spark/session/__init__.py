"""The Spark-session glue: `configure_spark`, Spark Connect sessions, `activate_in_thread` and what
the running pyspark offers."""
