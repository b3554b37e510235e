"""What every benchmark shares, written once: `report` (progress lines, interleaved runs, medians,
ratios, the table), `cpu` (CPU time from /proc), `cluster` (a staticmq LocalCluster), `clients`
(topics, producing and consuming on staticmq and Kafka), `spark` (the local[2] session, one timed
AvailableNow query), `kafka_server` and `spark_kafka` (Apache Kafka and Spark's Kafka connector),
`redis_server` (a throw-away Redis)."""
