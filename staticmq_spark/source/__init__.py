"""The Spark Structured Streaming (and batch) source: `spark.readStream.format("staticmq")`."""
