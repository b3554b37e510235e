"""Peer benchmarks (issue 18): staticmq against Spark's Kafka connector on Apache Kafka, in one run."""
