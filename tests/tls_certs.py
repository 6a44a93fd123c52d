"""Certificates made in the test, for mutual TLS between peers: a CA, and certificates it
signs for an IP address (as ``tools/stack.sh`` makes them for the stack's computes), plus the
self-signed ones a stranger would bring."""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


@dataclasses.dataclass(frozen=True)
class CertFiles:
    """PEM paths: ``cert`` and ``key``, and ``ca`` (the certificate of whoever signed it)."""

    cert: str
    key: str
    ca: str


class TestCA:
    """A CA writing its files under ``directory``."""

    __test__ = False  # not a pytest class

    def __init__(self, directory: pathlib.Path, name: str = "fleet CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            _builder(subject, subject, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()),
                           critical=False)
            .sign(self.key, hashes.SHA256())
        )
        self.ca_file = str(directory / f"{_slug(name)}.pem")
        pathlib.Path(self.ca_file).write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, ip: str = "127.0.0.1") -> CertFiles:
        """A certificate for host ``name`` at ``ip`` (an IP subject alternative name), for
        both ends of a connection."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            _builder(_cn(name), self.cert.subject, key.public_key())
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(ip))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        return _write(self.directory, name, cert, key, self.ca_file)


def self_signed(directory: pathlib.Path, name: str, ip: str = "127.0.0.1") -> CertFiles:
    """A certificate for ``name`` at ``ip`` that nobody but itself signed."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(_cn(name), _cn(name), key.public_key())
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    path = _write(directory, name, cert, key, "")
    return dataclasses.replace(path, ca=path.cert)


def _builder(subject: x509.Name, issuer: x509.Name,
             public_key: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY).not_valid_after(now + _DAY))


def _cn(name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


def _slug(name: str) -> str:
    return name.replace(" ", "-")


def _write(directory: pathlib.Path, name: str, cert: x509.Certificate,
           key: ec.EllipticCurvePrivateKey, ca_file: str) -> CertFiles:
    cert_file, key_file = directory / f"{_slug(name)}.crt", directory / f"{_slug(name)}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_file.chmod(0o600)
    return CertFiles(str(cert_file), str(key_file), ca_file)
