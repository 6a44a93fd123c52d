"""Test helpers: a real signing key and X.509 certificate, and Glance-style signature properties.

The signature is made as Glance's documentation tells image owners to make it and as cursive
checks it: over the image's bytes themselves (not a checksum), RSA-PSS with MGF1 and the
maximum salt length, with the named hash.
"""

from __future__ import annotations

import base64
import datetime
import uuid
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID

from fleetcache.common.context import RequestContext

HASHES = {"SHA-256": hashes.SHA256(), "SHA-512": hashes.SHA512()}


class Signer:
    """An RSA (or EC) key, its self-signed certificate and a certificate loader seam."""

    def __init__(self, key_type: str = "RSA-PSS") -> None:
        self.key_type = key_type
        self.key: Any = (ec.generate_private_key(ec.SECP384R1()) if key_type.startswith("ECC")
                         else rsa.generate_private_key(public_exponent=65537, key_size=2048))
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fleetcache image signer")])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(self.key, hashes.SHA256())
        )
        self.cert_uuid = str(uuid.uuid4())
        self.loaded: list[str] = []

    def sign(self, data: bytes, hash_method: str = "SHA-256") -> str:
        algorithm = HASHES[hash_method]
        if self.key_type.startswith("ECC"):
            raw = self.key.sign(data, ec.ECDSA(algorithm))
        else:
            raw = self.key.sign(
                data, padding.PSS(mgf=padding.MGF1(algorithm), salt_length=padding.PSS.MAX_LENGTH),
                algorithm)
        return base64.b64encode(raw).decode()

    def properties(self, data: bytes, hash_method: str = "SHA-256") -> dict[str, str]:
        """The four ``img_signature*`` properties of an image of ``data`` signed by this key."""
        return {
            "img_signature": self.sign(data, hash_method),
            "img_signature_hash_method": hash_method,
            "img_signature_key_type": self.key_type,
            "img_signature_certificate_uuid": self.cert_uuid,
        }

    def load_certificate(self, ctxt: RequestContext, cert_uuid: str) -> x509.Certificate:
        """The loader seam: this signer's certificate under its uuid (records the look-ups)."""
        self.loaded.append(cert_uuid)
        if cert_uuid != self.cert_uuid:
            from cursive import exception as cursive_exc

            raise cursive_exc.SignatureVerificationError(
                reason=f"Certificate not found with ID: {cert_uuid}")
        return self.certificate
