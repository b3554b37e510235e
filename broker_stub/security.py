"""What a server process needs to be secure: its ACL (who may call it), its TLS certificate and key
(so callers can check it and nobody reads the traffic), and the client side of its own calls to
other servers (a broker's heartbeats to the name server and its reads from other brokers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import grpc

from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.protocol.security.acl import Acl, load_acl
from staticmq_spark.protocol.security.auth import PLAIN, ClientSecurity, Credentials, credentials_from_keys


@dataclass(frozen=True)
class ServerSecurity:
    acl: Acl | None = None
    tls_cert: bytes | None = field(default=None, repr=False)
    tls_key: bytes | None = field(default=None, repr=False)
    client: ClientSecurity = PLAIN  # for this process's own calls to other servers

    def server_credentials(self) -> grpc.ServerCredentials | None:
        if self.tls_cert is None or self.tls_key is None:
            return None
        return grpc.ssl_server_credentials([(self.tls_key, self.tls_cert)])


OPEN = ServerSecurity()  # no ACL, plain text: the default on loopback


def server_security(
    acl_file: str = "",
    tls_cert: str = "",
    tls_key: str = "",
    tls_ca: str = "",
    access_key: str = "",
    secret_key: str = "",
) -> ServerSecurity:
    """Build a server's security from its flags. Its own calls are signed with `access_key` /
    `secret_key`, else with the first admin account of its ACL file; they trust `tls_ca`, else the
    server's own certificate (a self-signed certificate shared by the cluster)."""
    if bool(tls_cert) != bool(tls_key):
        raise InvalidOptionError("--tls-cert and --tls-key go together: give both or neither")
    acl = load_acl(acl_file) if acl_file else None
    cert = _pem(tls_cert, "--tls-cert", b"CERTIFICATE") if tls_cert else None
    key = _pem(tls_key, "--tls-key", b"PRIVATE KEY") if tls_key else None
    credentials = credentials_from_keys(access_key, secret_key, "--access-key and --secret-key")
    if credentials is None and acl is not None:
        admin = acl.first_admin()
        if admin is None:
            raise InvalidOptionError(
                f"ACL file {acl_file} has no admin account, which this server needs for its own calls "
                "(registration, reads from other brokers): add one or give --access-key/--secret-key"
            )
        credentials = Credentials(admin.access_key, admin.secret_key)
    ca = tls_ca or (tls_cert if tls_cert else "")
    return ServerSecurity(acl, cert, key, ClientSecurity(credentials, ca or None))


def _pem(path: str, flag: str, kind: bytes) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidOptionError(f"{flag} {path}: {exc.strerror or exc}") from None
    if b"-----BEGIN " not in data or kind not in data:
        raise InvalidOptionError(f"{flag} {path} holds no PEM {kind.decode().lower()}")
    return data
