"""How a first connection that got no answer is named and which error it gives (the pure part of
first contact; tests/integration/test_first_contact.py and the Spark tests show it on real servers).
The gRPC details are the ones grpcio gave against a broker_stub name server (a plain client at a TLS
server, a wrong port, a CA given to a plain server, a wrong CA, a host that does not resolve)."""

from __future__ import annotations

import socket
import ssl

import pytest

from staticmq_spark.backends.first_contact import AnsweredAddresses, NoAnswer, first_contact_error
from staticmq_spark.backends.rocketmq.wire.connection import socket_no_answer
from staticmq_spark.backends.staticmq.rpc import grpc_last_error, grpc_no_answer
from staticmq_spark.errors import BrokerUnavailableError, FirstContactError, TlsError

ADDR = "127.0.0.1:9876"
GRPC_DETAILS = {
    "failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:42123: Socket closed": (
        NoAnswer.CLOSED
    ),
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: "
    "Connection refused": NoAnswer.REFUSED,
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:35061: Tls handshake failed "
    "(TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER: "
    "Invalid certificate verification context: OK": NoAnswer.TLS,
    "errors resolving no-such-host.invalid:9876: [field:hostname lookup error:address lookup failed for "
    "no-such-host.invalid:9876: Domain name not found]": NoAnswer.UNRESOLVED,
    "Deadline Exceeded": NoAnswer.TIMEOUT,
    "something new": NoAnswer.OTHER,
}


@pytest.mark.parametrize("details", list(GRPC_DETAILS))
def test_grpc_details_of_a_channel_that_never_connected_name_how_it_failed(details: str) -> None:
    assert grpc_no_answer(details) is GRPC_DETAILS[details]


def test_the_reason_of_a_failed_grpc_tls_handshake_is_openssls() -> None:
    details = next(d for d, kind in GRPC_DETAILS.items() if kind is NoAnswer.TLS)
    assert grpc_last_error(details) == "WRONG_VERSION_NUMBER: Invalid certificate verification context"
    assert grpc_last_error("Deadline Exceeded") == "Deadline Exceeded"


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ConnectionRefusedError(111, "Connection refused"), NoAnswer.REFUSED),
        (ConnectionResetError(104, "Connection reset by peer"), NoAnswer.CLOSED),
        (BrokenPipeError(32, "Broken pipe"), NoAnswer.CLOSED),
        (EOFError("closed by the server"), NoAnswer.CLOSED),
        (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), NoAnswer.CLOSED),
        (socket.gaierror(-2, "Name or service not known"), NoAnswer.UNRESOLVED),
        (TimeoutError("timed out"), NoAnswer.TIMEOUT),
        (OSError(113, "No route to host"), NoAnswer.OTHER),
    ],
)
def test_socket_errors_name_how_a_rocketmq_connection_failed(exc: BaseException, kind: NoAnswer) -> None:
    assert socket_no_answer(exc) is kind


def test_a_plain_connection_closed_unanswered_is_not_retried_and_names_tls_and_credentials() -> None:
    error = first_contact_error(NoAnswer.CLOSED, ADDR, tls=False)
    assert isinstance(error, FirstContactError) and not error.retriable
    assert error.message == (
        f"the server at {ADDR} closed the connection before answering: does it expect TLS (the tlsCaFile "
        "option, --tls-ca on the command line) or credentials (the accessKey/secretKey options)?"
    )


def test_a_tls_connection_closed_unanswered_names_credentials_only() -> None:
    error = first_contact_error(NoAnswer.CLOSED, ADDR, tls=True)
    assert isinstance(error, FirstContactError)
    assert "credentials" in error.message and "tlsCaFile" not in error.message


def test_a_failed_tls_handshake_is_a_tls_error_with_openssls_reason() -> None:
    error = first_contact_error(NoAnswer.TLS, ADDR, tls=True, detail="BAD_SIGNATURE: certificate signature failure")
    assert isinstance(error, TlsError) and not error.retriable
    assert f"the TLS handshake with {ADDR} failed (BAD_SIGNATURE: certificate signature failure)" in error.message


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        (NoAnswer.REFUSED, f"connection refused: nothing listens at {ADDR}"),
        (NoAnswer.UNRESOLVED, f"the host of {ADDR} does not resolve"),
        (NoAnswer.TIMEOUT, f"{ADDR} did not answer in time"),
        (NoAnswer.OTHER, f"{ADDR} did not answer: No route to host"),
    ],
)
def test_a_refused_or_silent_address_stays_retriable_for_a_broker_that_is_down(kind: NoAnswer, says: str) -> None:
    """Only the backends' name-server lists turn these into NameServerUnreachableError: a broker's
    address comes from a live cluster, and a broker that is down looks the same."""
    error = first_contact_error(kind, ADDR, tls=False, detail="No route to host")
    assert type(error) is BrokerUnavailableError and error.retriable
    assert error.message.startswith(says)


def test_answered_addresses_are_remembered_per_key() -> None:
    answered = AnsweredAddresses()
    assert (ADDR, None) not in answered
    answered.mark((ADDR, None))
    assert (ADDR, None) in answered
    assert (ADDR, "ca.pem") not in answered, "an answer over plain text proves nothing about TLS"
