"""Request signing, RocketMQ's gRPC model: every call carries its time and an HMAC of it.

    x-mq-date-time: 20261125T120000Z
    authorization:  MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time, Signature=<hex>

The signature is HMAC-SHA1 over the date-time value with the account's secret key, so the secret
never travels; a server refuses a time more than `MAX_SKEW_S` away from its clock, so a captured
header is useless after a few minutes (TLS keeps it from being captured at all). Pure functions:
the client interceptor (protocol/transport/channels.py) and the server's check (broker_stub/auth.py) share them.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from staticmq_spark.errors import InvalidOptionError, UnauthenticatedError

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
ALGORITHM = "MQv2-HMAC-SHA1"
MAX_SKEW_S = 300.0
_TIME_FORMAT = "%Y%m%dT%H%M%SZ"
_HEADER_RE = re.compile(
    rf"{ALGORITHM} Credential=(?P<key>[^,\s]+), ?SignedHeaders=(?P<signed>[^,\s]+), ?Signature=(?P<sig>[0-9a-fA-F]+)"
)


@dataclass(frozen=True, slots=True)
class Credentials:
    """An account's keys. The secret is kept out of repr (it would end up in logs and tracebacks)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise InvalidOptionError("credentials need both an access key and a secret key")

    def grpc_metadata(self, now: float | None = None) -> tuple[tuple[str, str], tuple[str, str]]:
        """The two headers that sign a gRPC call made at `now` (seconds since the epoch)."""
        stamp = format_time(time.time() if now is None else now)
        header = (
            f"{ALGORITHM} Credential={self.access_key}, SignedHeaders={DATE_TIME}, "
            f"Signature={signature(self.secret_key, stamp)}"
        )
        return (AUTHORIZATION, header), (DATE_TIME, stamp)


def credentials_of(value: Credentials | tuple[str, str] | None) -> Credentials | None:
    """`credentials=` as the Python API takes it: a Credentials, an (access, secret) pair, or None."""
    if value is None or isinstance(value, Credentials):
        return value
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return Credentials(value[0], value[1])
    raise InvalidOptionError(f"credentials must be an (access_key, secret_key) pair, got {type(value).__name__}")


def credentials_from_keys(access_key: str, secret_key: str, names: str) -> Credentials | None:
    """Credentials from an access key and a secret key given as `names` (e.g. "--access-key and
    --secret-key"): both or neither (None)."""
    if bool(access_key) != bool(secret_key):
        raise InvalidOptionError(f"{names} go together: give both or neither")
    return Credentials(access_key, secret_key) if access_key else None


def format_time(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime(_TIME_FORMAT)


def signature(secret_key: str, stamp: str) -> str:
    return hmac.new(secret_key.encode(), stamp.encode(), hashlib.sha1).hexdigest()


@dataclass(frozen=True, slots=True)
class SignedCall:
    """What a call claims: who signed it, when, and the signature."""

    access_key: str
    stamp: str
    signature: str


def signed_call(metadata: Iterable[tuple[str, str | bytes]]) -> SignedCall:
    """The signing headers of a call, or UnauthenticatedError saying which part is missing."""
    headers = {k.lower(): v if isinstance(v, str) else v.decode("latin-1") for k, v in metadata}
    header = headers.get(AUTHORIZATION)
    if header is None:
        raise UnauthenticatedError(
            "the request carries no credentials: give an access key and secret key "
            "(--access-key/--secret-key, credentials=(...), or the Spark options accessKey/secretKey)"
        )
    match = _HEADER_RE.fullmatch(header.strip())
    if match is None:
        raise UnauthenticatedError(f"malformed authorization header (expected '{ALGORITHM} Credential=...')")
    if DATE_TIME not in match["signed"].lower().split(";"):
        raise UnauthenticatedError(f"the signature must cover the {DATE_TIME} header")
    stamp = headers.get(DATE_TIME)
    if stamp is None:
        raise UnauthenticatedError(f"the request is signed but has no {DATE_TIME} header")
    return SignedCall(match["key"], stamp, match["sig"].lower())


def check_signature(
    call: SignedCall, secret_key: str, now: float | None = None, max_skew_s: float = MAX_SKEW_S
) -> None:
    """Raise UnauthenticatedError unless `call` was signed with `secret_key` within the allowed skew."""
    if not hmac.compare_digest(call.signature, signature(secret_key, call.stamp)):
        raise UnauthenticatedError(f"wrong signature for access key {call.access_key!r} (is the secret key right?)")
    try:
        signed_at = datetime.strptime(call.stamp, _TIME_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        raise UnauthenticatedError(f"{DATE_TIME} {call.stamp[:40]!r} is not a yyyyMMddTHHmmssZ time") from None
    skew = (time.time() if now is None else now) - signed_at
    if abs(skew) > max_skew_s:
        raise UnauthenticatedError(
            f"the request of {call.access_key!r} was signed at {call.stamp}, {abs(skew):.0f} s "
            f"{'ago' if skew > 0 else 'ahead'}: more than {max_skew_s:.0f} s from the server's clock "
            "(a replayed request, or a clock to set right)"
        )


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How a client proves who it is (`credentials`) and checks whom it talks to (`tls_ca`: a PEM
    file of the certificate authority that signed the servers' certificates; None: plain text)."""

    credentials: Credentials | None = None
    tls_ca: str | None = None

    @staticmethod
    def of(
        credentials: Credentials | tuple[str, str] | None = None, tls_ca: str | Path | None = None
    ) -> ClientSecurity:
        return ClientSecurity(credentials_of(credentials), str(tls_ca) if tls_ca else None)


PLAIN = ClientSecurity()
