"""TLS over a plain socket for a connection that one thread reads while others write.

An `ssl.SSLSocket` must not be read and written from two threads at once: both calls run OpenSSL
on the same SSL object with the GIL released, and under TLS 1.3 a read may itself write (session
tickets, key updates). Seen as lost answers and stray ciphertext. Here OpenSSL only ever works on
memory buffers (`SSLObject` + `MemoryBIO`), one call at a time under `_ssl_lock`; the socket's
blocking reads and writes happen outside that lock. Ciphertext leaves in the order it was made:
it is encrypted and sent under `_send_lock`, and whatever a read produced is drained in order by
the next holder of `_send_lock`.
"""

from __future__ import annotations

import socket
import ssl
import threading

_CHUNK = 1 << 20


class TlsStream:
    """`sendall` from any thread, `recv` from one reader thread; `handshake` first."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        self._ssl_lock = threading.Lock()
        self._send_lock = threading.Lock()

    def handshake(self) -> None:
        """Raises ssl.SSLError (e.g. SSLCertVerificationError) or OSError."""
        while True:
            try:
                with self._ssl_lock:
                    self._tls.do_handshake()
            except ssl.SSLWantReadError:
                self._flush()
                self._feed_or_eof()
                continue
            self._flush()
            return

    def sendall(self, data: bytes) -> None:
        with self._send_lock:
            with self._ssl_lock:
                self._tls.write(data)
                ciphertext = self._outgoing.read()
            self._sock.sendall(ciphertext)

    def recv(self, n: int) -> bytes:
        """Up to n bytes of plaintext; b"" once the server closed."""
        while True:
            with self._ssl_lock:
                try:
                    data = self._tls.read(n)
                except ssl.SSLWantReadError:
                    data = b""
                except ssl.SSLZeroReturnError:
                    return b""
                produced = self._outgoing.pending
            if produced:
                self._flush()
            if data:
                return data
            if not self._feed_or_eof():
                return b""

    def _feed_or_eof(self) -> bool:
        raw = self._sock.recv(_CHUNK)
        if not raw:
            with self._ssl_lock:
                self._incoming.write_eof()
            return False
        with self._ssl_lock:
            self._incoming.write(raw)
        return True

    def _flush(self) -> None:
        with self._send_lock:
            with self._ssl_lock:
                ciphertext = self._outgoing.read()
            if ciphertext:
                self._sock.sendall(ciphertext)

    # the socket calls Connection makes besides send and receive
    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self._sock.setsockopt(level, option, value)

    def shutdown(self, how: int) -> None:
        self._sock.shutdown(how)

    def close(self) -> None:
        self._sock.close()
