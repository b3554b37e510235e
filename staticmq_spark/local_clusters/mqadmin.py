r"""Run Apache RocketMQ's own `mqadmin` from the jars staticmq fetched (no RocketMQ install needed).

    python -m staticmq_spark.local_clusters.mqadmin -n rocketmq://127.0.0.1:9876 \
        updateStaticTopic -t orders -qn 8 -c DefaultCluster

Prints mqadmin's output; exits 1 when it failed (mqadmin itself exits 0 either way).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from staticmq_spark.backends.address import parse_address
from staticmq_spark.local_clusters.rocketmq import MQAdmin, RocketMQClusterError


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    namesrv = os.environ.get("NAMESRV_ADDR", "")
    if len(args) >= 2 and args[0] in ("-n", "--namesrv"):
        namesrv, args = args[1], args[2:]
    if not namesrv or not args:
        print(__doc__, file=sys.stderr)
        return 2
    hosts = ";".join(parse_address(namesrv).hosts)
    try:
        print(MQAdmin(hosts, Path(tempfile.gettempdir()) / "staticmq-mqadmin").run(*args))
    except RocketMQClusterError as exc:
        print(exc.message, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
