"""First contact with an address: how a connection that never got an answer failed, and what that
most likely means (pure: no I/O).

A connection the server refuses or closes before any answer, or whose TLS handshake fails, means
one thing when the address answered this process before (the server went away: retry it for
`retryTimeoutMs`) and another when it never did (a wrong port, TLS or credentials expected: say so
within seconds). Which addresses answered is known only where the connection lives, in each backend
(`staticmq/route.py`, `rocketmq/wire/connection.py`); this module names the failure (`NoAnswer`), words
its likely cause and picks the error:

- `CLOSED` (accepted, then closed unanswered) -> FirstContactError: not retried, no server that is
  up closes a well-formed first request unless it expects TLS or credentials;
- `TLS` (the handshake failed) -> TlsError: not retried;
- `REFUSED`, `UNRESOLVED`, `TIMEOUT`, `OTHER` -> BrokerUnavailableError, retriable: a broker that
  is down or restarting looks the same. A name-server list none of whose addresses ever answered
  fails at once whatever the cause (NameServerUnreachableError, raised by the backends): its
  addresses are the user's, not learned from a live cluster.
"""

from __future__ import annotations

from collections.abc import Hashable
from enum import Enum

from staticmq_spark.errors import BrokerUnavailableError, FirstContactError, StaticMQError, TlsError

TLS_HINT = "the tlsCaFile option, --tls-ca on the command line"
KEYS_HINT = "the accessKey/secretKey options"


class NoAnswer(Enum):
    """How a connection to an address failed before any answer came back."""

    REFUSED = "refused"  # nothing listens there
    CLOSED = "closed"  # accepted, then closed (or reset) by the server before answering
    TLS = "tls"  # the TLS handshake failed
    UNRESOLVED = "unresolved"  # the host name does not resolve
    TIMEOUT = "timeout"  # nothing came back in time (a firewall dropping packets?)
    OTHER = "other"


def no_answer_cause(kind: NoAnswer, addr: str, *, tls: bool, detail: str = "") -> str:
    """What `kind` most likely means at `addr`, for a client that used TLS (`tls`) or not."""
    if kind is NoAnswer.REFUSED:
        return f"connection refused: nothing listens at {addr} (a wrong port, or a server that is down?)"
    if kind is NoAnswer.CLOSED:
        if tls:
            return (
                f"the server at {addr} closed the TLS connection before answering: does it expect credentials "
                f"({KEYS_HINT})?"
            )
        return (
            f"the server at {addr} closed the connection before answering: does it expect TLS ({TLS_HINT}) "
            f"or credentials ({KEYS_HINT})?"
        )
    if kind is NoAnswer.TLS:
        why = f" ({detail})" if detail else ""
        return (
            f"the TLS handshake with {addr} failed{why}: does it serve TLS, with a certificate that the CA "
            f"given signed ({TLS_HINT})?"
        )
    if kind is NoAnswer.UNRESOLVED:
        return f"the host of {addr} does not resolve (a typo in the address?)"
    if kind is NoAnswer.TIMEOUT:
        return f"{addr} did not answer in time (a firewall dropping the packets, or a wrong host?)"
    return f"{addr} did not answer" + (f": {detail}" if detail else "")


def first_contact_error(kind: NoAnswer, addr: str, *, tls: bool, detail: str = "") -> StaticMQError:
    """The error of a first connection to `addr` (which never answered this process) that failed
    as `kind`; see the module docstring for which are retried."""
    cause = no_answer_cause(kind, addr, tls=tls, detail=detail)
    if kind is NoAnswer.CLOSED:
        return FirstContactError(cause)
    if kind is NoAnswer.TLS:
        return TlsError(cause)
    return BrokerUnavailableError(cause)


class AnsweredAddresses:
    """The addresses (keyed with whatever connection setting changes the answer, e.g. TLS on or
    off) that answered this process at least once: one per backend, per process (a set's add and
    membership test are atomic, so any thread may call either)."""

    def __init__(self) -> None:
        self._seen: set[Hashable] = set()

    def mark(self, key: Hashable) -> None:
        self._seen.add(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._seen
