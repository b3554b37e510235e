"""Soak run: a Delta bronze stream over a remapped static topic while brokers and the driver are killed.

    python -m bench.soak --backend staticmq    # 1,000,000 messages, 10 remaps, 3 broker kills, 1 driver kill
    python -m bench.soak --backend rocketmq --messages 200000 --json soak.json
    python -m bench.soak --messages 50000 --remaps 3 --broker-kills 1 --dir /tmp/soak   # a quick one

Run on demand, not in CI (a full run takes many minutes). It starts a cluster of 3 brokers (a
`LocalCluster` of broker_stub processes, or a real Apache RocketMQ 5.5 through `LocalRocketMQ`),
creates a static topic of 16 logic queues, and starts a Structured Streaming query in a child
process (`python -m bench.soak driver ...`): `readStream.format("staticmq")` into a Delta table
(bronze: every message with key, value, queueId and queueOffset), with a checkpoint. Meanwhile a
producer sends keyed messages (5,000 keys; the body is `k<key>:<seq>`, seq counting that key's
messages) in batches until N were acknowledged. A batch whose send raised is "unacked": it may or
may not be stored, so it may appear at most once. The faults, spread evenly over the production
(the producer never runs more than one fault ahead): remaps of the topic over the 3 brokers
(`Admin.remapping_static_topic`, on either backend), kill -9 of one broker and its restart on the
same port and data directory, and kill -9 of the driver (the query's whole process group) and its
restart on the same checkpoint.

At the end the driver is told to catch up (`processAllAvailable`), stops the query and exports
(key, value, queueId, queueOffset) of the table; the checks: every acknowledged message exactly
once, no unacknowledged one more than once, nothing unknown, each key on one logic queue and its
acknowledged messages in send order by (queueId, queueOffset). Exit status 1 when a check fails
(or the query died), 0 otherwise; `--json FILE` writes the figures. Results: docs/soak.md.

The modules: `__main__` (the command line), `clusters` (the brokers under test: start, create and
remap the topic, kill and restart a broker), `traffic` (the producer), `query` (the streaming
query's child process and the handle that starts and kills it), `run` (the fault plan and the run
loop), `verdict` (the checks of the exported table and the summary).
"""
