"""A process that consumes exclusively and prints every batch it hands out as one JSON line (its
queue, offsets, bodies and the wall-clock time; then commits it), until it is killed:
`python -m tests.support.exclusive_worker NAMESRV GROUP TOPIC LEASE_S [CLIENT_ID]`."""

from __future__ import annotations

import json
import sys
import time

from staticmq_spark.client import ExclusiveConsumer


def main() -> None:
    namesrv, group, topic, lease = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    client_id = sys.argv[5] if len(sys.argv) > 5 else "worker"
    with ExclusiveConsumer(namesrv, group, topic, lease_s=lease, client_id=client_id) as consumer:
        print(json.dumps({"started": True}), flush=True)
        while True:
            for result in consumer.poll(max_messages=5, wait_s=0.5):
                offsets = result.batch.column("queue_offset").to_pylist()
                bodies = [b.decode(errors="replace") for b in result.batch.column("body").to_pylist()]
                batch = {"queue": result.queue_id, "offsets": offsets, "bodies": bodies, "at": time.time()}
                print(json.dumps(batch), flush=True)
            consumer.commit()


if __name__ == "__main__":
    main()
