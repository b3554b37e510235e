"""No silent exposure: a server bound to a non-loopback address is reachable by anyone on that
network. Binding one needs `--acl` (every call authenticated) or `--insecure` (like Redis's
protected mode), and is logged as a warning every time."""

from __future__ import annotations

import ipaddress
import logging

from staticmq_spark.errors import InvalidOptionError

log = logging.getLogger("staticmq.cli")


def is_loopback(host: str) -> bool:
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_exposure(host: str, insecure: bool, what: str, *, acl: bool = False, tls: bool = False) -> None:
    """Refuse serving `what` on a non-loopback `host` without an ACL (unless `insecure`); warn always."""
    if is_loopback(host):
        return
    if acl:
        log.warning(
            "the %s serves on %s: callers must sign with an ACL account; %s",
            what,
            host,
            "traffic is TLS-encrypted" if tls else "traffic is plain text (add --tls-cert/--tls-key)",
        )
        return
    if not insecure:
        raise InvalidOptionError(
            f"--host {host} would expose the {what} beyond this machine without authentication: anyone who "
            "reaches the port could send, read, delete or remap topics. Bind 127.0.0.1, give --acl FILE "
            "(accounts and permissions), or pass --insecure to serve on a trusted network anyway"
        )
    log.warning("the %s serves on %s without authentication (--insecure): trusted networks only", what, host)
