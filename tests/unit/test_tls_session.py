"""The broker's sans-I/O TLS layer: a handshake with a client certificate, plaintext both ways,
and garbage failing the handshake with an SSLError (no sockets: memory BIOs)."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

import pytest

from epochlog.broker.tls_transport import TlsSession
from epochlog.security.certs import CertificateAuthority
from epochlog.security.principal_mapping import PrincipalMapper, certificate_principal


def contexts(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca = CertificateAuthority.create(tmp_path)
    broker, alice = ca.issue("broker"), ca.issue("alice")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(broker.keystore)
    server.load_verify_locations(ca.ca_file)
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.create_default_context(cafile=str(ca.ca_file))
    client.load_cert_chain(alice.keystore)
    return server, client


def test_handshake_then_plaintext_both_ways_and_the_certificate_principal(tmp_path: Path) -> None:
    server_ctx, client_ctx = contexts(tmp_path)
    session = TlsSession(server_ctx)
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    for _ in range(5):
        with contextlib.suppress(ssl.SSLWantReadError):
            client.do_handshake()
        session.receive(c_out.read())
        if not session.established:
            session.handshake()
        c_in.write(session.outgoing())
    client.do_handshake()
    assert session.established
    client.write(b"request")
    session.receive(c_out.read())
    buffer = memoryview(bytearray(100))
    assert session.read_into(buffer) == 7 and bytes(buffer[:7]) == b"request"
    assert session.read_into(buffer) == 0  # nothing more yet
    c_in.write(session.encrypt(b"answer"))
    assert client.read(100) == b"answer"
    principal = certificate_principal(session.peer_certificate(), PrincipalMapper.from_rules(None))
    assert str(principal) == "User:CN=alice"


def test_garbage_fails_the_handshake(tmp_path: Path) -> None:
    server_ctx, _ = contexts(tmp_path)
    session = TlsSession(server_ctx)
    session.receive(b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test")
    with pytest.raises(ssl.SSLError):
        session.handshake()
