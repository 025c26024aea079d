"""A certificate authority and certificates it signs, as PEM files: for tests and local clusters.

`CertificateAuthority.create(dir)` makes a self-signed CA (an EC P-256 key, valid ten years) and
writes `ca.pem` (its certificate: the truststore of brokers and clients). `ca.issue(name, ...)`
makes a key and a certificate signed by the CA for a subject (`CN=<name>` plus any attributes
given) with the host names and IP addresses it serves as subject alternative names, and writes
`<name>.pem`: the private key and the certificate chain (leaf, CA) in one file, which is what
Kafka's `ssl.keystore.type=PEM` reads from `ssl.keystore.location` (KIP-651), and also
`<name>.key` and `<name>.crt` apart, which is what librdkafka's `ssl.key.location` and
`ssl.certificate.location` take. A key can be encrypted with a password (`ssl.key.password`).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from epochlog.security.principal_mapping import rfc2253_name

VALID_DAYS = 3650


@dataclass(frozen=True)
class IssuedCertificate:
    """Where an issued certificate's files are, and its subject as Java writes it."""

    keystore: Path  # private key + certificate chain (Kafka's PEM keystore)
    key: Path
    certificate: Path  # the leaf certificate alone
    subject: str  # RFC 2253, e.g. CN=broker-1,O=epochlog


class CertificateAuthority:
    def __init__(
        self, key: ec.EllipticCurvePrivateKey, certificate: x509.Certificate, directory: Path
    ) -> None:
        self.key = key
        self.certificate = certificate
        self.directory = directory
        self.ca_file = directory / "ca.pem"

    @classmethod
    def create(cls, directory: str | Path, name: str = "epochlog-ca") -> CertificateAuthority:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        ca = cls(key, certificate, directory)
        ca.ca_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        return ca

    def issue(
        self,
        name: str,
        *,
        hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
        attributes: tuple[tuple[x509.ObjectIdentifier, str], ...] = (),
        password: str | None = None,
    ) -> IssuedCertificate:
        """A certificate for `CN=name` (then `attributes`, most specific first as in the DN
        string) valid for `hosts`, usable by servers and clients alike."""
        key = ec.generate_private_key(ec.SECP256R1())
        # x509.Name lists the least specific attribute first; the DN string the other way.
        subject = x509.Name(
            [x509.NameAttribute(oid, value) for oid, value in reversed(attributes)]
            + [x509.NameAttribute(NameOID.COMMON_NAME, name)]
        )
        alt_names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                alt_names.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), False
            )
        )
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), False)
        certificate = builder.sign(self.key, hashes.SHA256())
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )
        cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
        ca_pem = self.certificate.public_bytes(serialization.Encoding.PEM)
        keystore = self.directory / f"{name}.pem"
        keystore.write_bytes(key_pem + cert_pem + ca_pem)
        key_file = self.directory / f"{name}.key"
        key_file.write_bytes(key_pem)
        cert_file = self.directory / f"{name}.crt"
        cert_file.write_bytes(cert_pem + ca_pem)
        for path in (keystore, key_file):
            path.chmod(0o600)
        return IssuedCertificate(keystore, key_file, cert_file, rfc2253_name(subject))
