"""Free TCP ports on loopback for the local clusters and for the tests' and benchmarks' services."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listened on a moment ago (bound, then closed): for a service
    about to start there, or as an address where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
