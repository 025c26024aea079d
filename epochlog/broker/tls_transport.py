"""TLS for the broker's connections as a sans-I/O layer: `ssl.SSLObject` over two memory BIOs.

Why not `create_server(ssl=...)` or `loop.start_tls`: with either, a handshake that fails never
reaches our protocol (asyncio and uvloop drop an `OSError` there silently unless the loop is in
debug mode), so a plaintext client or garbage on a TLS port would leave no trace; and with
`start_tls` on uvloop the first bytes (the ClientHello) reach the plain protocol before TLS takes
over, because uvloop starts reading right after `connection_made`. Here the server's protocol
sees every byte: ciphertext goes into `TlsSession.receive`, the handshake advances as it
arrives, and a failure is an exception the server logs in one line before it closes that
connection.

`TlsSession` holds no socket: `receive(ciphertext)`, `handshake()`, `read_into(buffer)` for
plaintext, `encrypt(plaintext)` and `outgoing()` for the ciphertext to send. `TlsTransport`
wraps the plain transport for the server's writers (responses, file slices read through it):
`write` encrypts, everything else (flow control, buffer size, closing, extra info) is the plain
transport's, so the server's flow control is unchanged.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, cast


class TlsSession:
    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.ssl_object = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.established = False

    def receive(self, ciphertext: bytes | memoryview) -> None:
        self._incoming.write(ciphertext)

    def handshake(self) -> bool:
        """Advance the handshake with what was received; True once it is complete. Raises
        ssl.SSLError (or OSError) when it fails."""
        try:
            self.ssl_object.do_handshake()
        except ssl.SSLWantReadError:
            return False
        self.established = True
        return True

    def read_into(self, buffer: memoryview) -> int:
        """Plaintext into `buffer`: the bytes read, 0 when more ciphertext is needed, -1 when
        the peer closed TLS (close_notify)."""
        try:
            # with a buffer, SSLObject.read returns the count (typeshed says bytes)
            return cast(int, self.ssl_object.read(len(buffer), buffer))
        except ssl.SSLWantReadError:
            return 0
        except ssl.SSLZeroReturnError:
            return -1

    def encrypt(self, plaintext: bytes | bytearray | memoryview) -> bytes:
        self.ssl_object.write(plaintext)
        return self._outgoing.read()

    def outgoing(self) -> bytes:
        """Ciphertext waiting to be sent (handshake messages, session tickets, alerts)."""
        return self._outgoing.read()

    def peer_certificate(self) -> bytes | None:
        return self.ssl_object.getpeercert(binary_form=True)


class TlsTransport:
    """The plain transport with `write` encrypting through the session."""

    def __init__(self, raw: asyncio.Transport, session: TlsSession) -> None:
        self.raw = raw
        self.session = session

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if data and not self.raw.is_closing():
            self.raw.write(self.session.encrypt(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self.session.ssl_object
        return self.raw.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self.raw.is_closing()

    def close(self) -> None:
        self.raw.close()

    def abort(self) -> None:
        self.raw.abort()

    def get_write_buffer_size(self) -> int:
        return self.raw.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.raw.set_write_buffer_limits(high, low)

    def pause_reading(self) -> None:
        self.raw.pause_reading()

    def resume_reading(self) -> None:
        self.raw.resume_reading()
