"""One TCP connection to a RocketMQ server: requests pipelined, answers matched by `opaque`.

Which addresses answered this process (`_ANSWERED`, by address and TLS on or off) is kept here: a
connection to an address that never answered and is closed by the server before any answer fails
with FirstContactError (not retried: it most likely expects TLS or credentials), and a refused one
names the likely cause (first_contact.py); an address that answered before and went away gives
BrokerUnavailableError, retried as before.
"""

from __future__ import annotations

import itertools
import logging
import socket
import ssl
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np
import numpy.typing as npt

from staticmq_spark.backends.first_contact import AnsweredAddresses, NoAnswer, first_contact_error
from staticmq_spark.backends.rocketmq.wire.frames import RemotingCommand, decode_frame, encode_request, frame_length
from staticmq_spark.backends.rocketmq.wire.tls_stream import TlsStream
from staticmq_spark.closing import Closeable
from staticmq_spark.errors import BrokerUnavailableError, InvalidOptionError, StaticMQError, TlsError

log = logging.getLogger(__name__)
_OPAQUES = itertools.count(1)
_ANSWERED = AnsweredAddresses()  # (address, TLS on) of the servers that answered this process


def answered(addr: str, tls: bool) -> bool:
    """Whether `addr` (reached with TLS or not) answered this process at least once."""
    return (addr, tls) in _ANSWERED


def socket_no_answer(exc: BaseException) -> NoAnswer:
    """How connecting, or reading or writing a connection, failed, from the error raised."""
    if isinstance(exc, ConnectionRefusedError):
        return NoAnswer.REFUSED
    closed = ConnectionResetError | ConnectionAbortedError | BrokenPipeError | EOFError | ssl.SSLEOFError
    if isinstance(exc, closed):
        return NoAnswer.CLOSED
    if isinstance(exc, socket.gaierror):
        return NoAnswer.UNRESOLVED
    if isinstance(exc, TimeoutError):
        return NoAnswer.TIMEOUT
    return NoAnswer.OTHER


def reserve_opaques(n: int) -> npt.NDArray[np.int64]:
    """n request ids no other request of this process uses (each fits in an int32)."""
    ids = np.fromiter((next(_OPAQUES) for _ in range(n)), dtype=np.int64, count=n)
    return ids & 0x7FFFFFFF


def split_host_port(addr: str) -> tuple[str, int]:
    """`host:port`, `[v6]:port` or a bare IPv6 `a:b::c:port` (RocketMQ writes the last form)."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise BrokerUnavailableError(f"RocketMQ address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class Connection(Closeable):
    """Thread-safe: any thread may call `request`; one reader thread completes the futures."""

    def __init__(self, addr: str, connect_timeout_s: float = 3.0, tls: ssl.SSLContext | None = None) -> None:
        self.addr = addr
        self._key = (addr, tls is not None)
        self._answered = False  # this connection read an answer
        host, port = split_host_port(addr)
        try:
            sock = socket.create_connection((host, port), timeout=connect_timeout_s)
        except OSError as exc:
            if self._key in _ANSWERED:
                raise BrokerUnavailableError(f"cannot connect to RocketMQ at {addr}: {exc}") from None
            raise first_contact_error(socket_no_answer(exc), addr, tls=tls is not None, detail=str(exc)) from None
        self._sock: socket.socket | TlsStream = sock if tls is None else _tls_handshake(sock, tls, addr, host)
        self._sock.settimeout(None)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._write_lock = threading.Lock()
        self._pending: dict[int, Future[RemotingCommand]] = {}
        self._pending_lock = threading.Lock()
        self._closed: str | None = None
        self._first_contact_closed = False  # closed by the server before the address ever answered
        self._reader = threading.Thread(target=self._read_loop, name=f"rocketmq-{addr}", daemon=True)
        self._reader.start()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def request(self, code: int, ext: dict[str, object], body: bytes = b"", timeout_s: float = 5.0) -> RemotingCommand:
        return self.wait(self.submit(code, ext, body), code, timeout_s)

    def submit(self, code: int, ext: dict[str, object], body: bytes = b"") -> tuple[int, Future[RemotingCommand]]:
        """Send a request without waiting: (opaque, future of the answer); see `wait`."""
        opaque = next(_OPAQUES) & 0x7FFFFFFF
        return self.submit_encoded(encode_request(code, opaque, ext, body), [opaque])[0]

    def submit_many(
        self, requests: list[tuple[int, dict[str, object], bytes]]
    ) -> list[tuple[int, Future[RemotingCommand]]]:
        """Many requests in one write (pipelined): (opaque, future) for each, in order."""
        opaques = reserve_opaques(len(requests))
        ids = opaques.tolist()
        pairs = zip(requests, ids, strict=True)
        frames = b"".join(encode_request(code, opaque, ext, body) for (code, ext, body), opaque in pairs)
        return self.submit_encoded(frames, ids)

    def submit_encoded(self, frames: bytes, opaques: Sequence[int]) -> list[tuple[int, Future[RemotingCommand]]]:
        """Frames encoded already (one or many, e.g. frame_columns'), with their request ids, in one
        write: the one place a request is registered and written."""
        sent: list[tuple[int, Future[RemotingCommand]]] = []
        with self._pending_lock:
            if self._closed is not None:
                raise self._lost(f"connection to RocketMQ at {self.addr} is closed: {self._closed}")
            for opaque in opaques:
                future: Future[RemotingCommand] = Future()
                self._pending[opaque] = future
                sent.append((opaque, future))
        try:
            with self._write_lock:
                self._sock.sendall(frames)
        except OSError as exc:
            self._fail(f"write failed: {exc}", socket_no_answer(exc))
            raise self._lost(f"lost the connection to RocketMQ at {self.addr}: {exc}") from None
        return sent

    def wait(self, sent: tuple[int, Future[RemotingCommand]], code: int, timeout_s: float) -> RemotingCommand:
        opaque, future = sent
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout:
            raise BrokerUnavailableError(
                f"RocketMQ at {self.addr} did not answer request code {code} within {timeout_s:g} s"
            ) from None
        finally:
            with self._pending_lock:
                self._pending.pop(opaque, None)

    def _read_loop(self) -> None:
        try:
            while True:
                frame = self._read_exactly(frame_length(self._read_exactly(4)))
                cmd = decode_frame(frame)
                if not self._answered:
                    self._answered = True
                    _ANSWERED.mark(self._key)
                if not cmd.is_response:
                    continue  # server -> client requests go only to clients that sent heartbeats
                with self._pending_lock:
                    future = self._pending.pop(cmd.opaque, None)
                if future is not None and not future.done():
                    future.set_result(cmd)
        except Exception as exc:
            self._fail(str(exc) or type(exc).__name__, socket_no_answer(exc))

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self._sock.recv(min(n - len(chunks), 1 << 20))
            if not chunk:
                raise EOFError("closed by the server")
            chunks += chunk
        return bytes(chunks)

    def _lost(self, message: str) -> StaticMQError:
        """The error of a request on this connection once it failed: FirstContactError when the
        server closed it before any answer and this address never answered this process."""
        if self._first_contact_closed:
            return first_contact_error(NoAnswer.CLOSED, self.addr, tls=self._key[1])
        return BrokerUnavailableError(message)

    def _fail(self, reason: str, how: NoAnswer = NoAnswer.OTHER) -> None:
        with self._pending_lock:
            if self._closed is None:
                self._closed = reason
                self._first_contact_closed = (
                    how is NoAnswer.CLOSED and not self._answered and self._key not in _ANSWERED
                )
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(self._lost(f"lost the connection to RocketMQ at {self.addr}: {reason}"))
        try:  # shutdown first: it wakes a reader blocked in recv, which close alone does not
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass

    def close(self) -> None:
        self._fail("closed by the client")


def tls_context(ca_file: str) -> ssl.SSLContext:
    """Client TLS that verifies the server's certificate and host name against `ca_file` (PEM)."""
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidOptionError(f"TLS CA file {ca_file!r} cannot be used: {exc}") from None


def _tls_handshake(sock: socket.socket, tls: ssl.SSLContext, addr: str, host: str) -> TlsStream:
    stream = TlsStream(sock, tls, host)
    try:
        stream.handshake()
        return stream
    except ssl.SSLCertVerificationError as exc:
        sock.close()
        raise TlsError(
            f"TLS to RocketMQ at {addr}: its certificate does not verify against the CA given "
            f"({exc.verify_message or exc.reason}); give the CA that signed the cluster's certificates"
        ) from None
    except (ssl.SSLError, OSError) as exc:
        sock.close()
        raise TlsError(
            f"TLS to RocketMQ at {addr} failed ({exc}): is the cluster started with tls.server.mode=enforcing?"
        ) from None


class ConnectionPool:
    """One live connection per address; a dead one is replaced on the next request."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._conns: dict[str, Connection] = {}
        self._lock = threading.Lock()
        self._tls = tls

    def answered(self, addr: str) -> bool:
        """Whether `addr`, reached as this pool reaches it (TLS or not), answered this process."""
        return answered(addr, self._tls is not None)

    def get(self, addr: str) -> Connection:
        with self._lock:
            conn = self._conns.get(addr)
            if conn is None or conn.closed:
                conn = self._conns[addr] = Connection(addr, tls=self._tls)
            return conn

    def close(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()
