"""Children that die with their parent: Linux's PR_SET_PDEATHSIG.

A `staticmq cluster` killed with SIGKILL cannot stop its name server and brokers itself; with
this the kernel sends them SIGTERM (they shut down as on Ctrl-C), so no orphan keeps a port and
a restart on the same data directory works. The parent starts the child with `child_env()`;
the child's CLI entry calls `honour_parent()`, which sets the signal (no preexec_fn, which is
unsafe with threads). The kernel follows the *thread* that forked the child, so children are
only tied to their parent when spawned from the main thread.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1
ENV = "STATICMQ_DIE_WITH_PARENT"


def child_env() -> dict[str, str] | None:
    """The environment for a child that must die with this process (None: inherit as is)."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    return {**os.environ, ENV: str(os.getpid())}


def honour_parent() -> None:
    """In the child: ask for SIGTERM when the parent named by the environment dies."""
    parent = os.environ.pop(ENV, "")
    if not parent:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != int(parent):  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)
