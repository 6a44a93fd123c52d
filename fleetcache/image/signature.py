"""Image signature verification (Glance's ``img_signature*`` properties), while streaming.

With ``[glance] verify_glance_signatures`` on, an image that carries the four properties
``img_signature`` (base64), ``img_signature_hash_method`` (``SHA-256``...),
``img_signature_key_type`` (``RSA-PSS``, ``DSA``, ``ECC_*``) and
``img_signature_certificate_uuid`` is verified as Nova does it: cursive builds a verifier from
the signing certificate's public key, every byte of the image is fed to it as it streams
(:meth:`SignatureCheck.feed`, the download's per-chunk hook), and :meth:`SignatureCheck.finish`
checks the signature before the file is published. The file is never read again for it.

The certificate comes from the key manager (Barbican, through castellan, as cursive does) by
default; :data:`CertificateLoader` is the seam to give it another way (tests, labs). Errors of
cursive and cryptography are translated here, once, to
:class:`~fleetcache.common.exception.ImageSignatureVerificationFailed`.

Images with none of the four properties are not verified; some but not all of them is an error
(an image that looks signed must verify).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cryptography import exceptions as crypto_exc
from cryptography import x509
from cursive import exception as cursive_exc
from cursive import signature_utils
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image.source import Buffer, ImageMeta

LOG = logging.getLogger(__name__)

#: The image properties a signed image carries, in the order they are reported missing.
SIGNATURE_PROPERTIES = (
    signature_utils.SIGNATURE,
    signature_utils.HASH_METHOD,
    signature_utils.KEY_TYPE,
    signature_utils.CERT_UUID,
)

#: Returns the X.509 certificate with the given key manager id.
CertificateLoader = Callable[[RequestContext, str], x509.Certificate]


def key_manager_certificate(ctxt: RequestContext, cert_uuid: str) -> x509.Certificate:
    """The certificate from the key manager, as cursive fetches it (castellan, Barbican).

    :raises SignatureVerificationError: (cursive's) when it cannot be fetched or read.
    """
    certificate: x509.Certificate = signature_utils.get_certificate(ctxt, cert_uuid)
    return certificate


class SignatureCheck:
    """Verifies one image's signature over the bytes fed to it (a ``DownloadCheck``)."""

    def __init__(self, meta: ImageMeta, verifier: Any) -> None:
        self.meta = meta
        self._verifier = verifier
        self.bytes_seen = 0

    def feed(self, chunk: Buffer) -> None:
        self._verifier.update(chunk)
        self.bytes_seen += len(chunk)

    def before_conversion(self, virtual_size: int) -> None:
        """Nothing: the signature covers the downloaded bytes, checked by :meth:`finish`."""

    def finish(self, path: str) -> None:
        """Check the signature over every byte fed.

        :raises ImageSignatureVerificationFailed: when it does not match.
        """
        props = self.meta.properties
        try:
            self._verifier.verify()
        except crypto_exc.InvalidSignature as exc:
            LOG.error("Image signature verification failed for image %s", self.meta.id)
            raise _failed(
                self.meta,
                f"the signature does not match the image's {self.bytes_seen} bytes "
                f"({props[signature_utils.KEY_TYPE]}, {props[signature_utils.HASH_METHOD]}, "
                f"certificate {props[signature_utils.CERT_UUID]})",
            ) from exc
        LOG.info("Image signature verification succeeded for image %s", self.meta.id)


def signature_check(
    conf: cfg.ConfigOpts,
    ctxt: RequestContext,
    meta: ImageMeta,
    load_certificate: CertificateLoader = key_manager_certificate,
) -> SignatureCheck | None:
    """The signature check of ``meta``'s download, or None when there is nothing to verify.

    Called before the download starts, so a broken signature setup fails before any byte is
    fetched (as Nova, bug 2053027).

    :raises ImageSignatureVerificationFailed: some signature properties are missing, or one
        is invalid (encoding, hash method, key type), or the certificate cannot be had or does
        not hold a key of the declared type.
    """
    if not conf.glance.verify_glance_signatures:
        return None
    values = {name: meta.properties.get(name) for name in SIGNATURE_PROPERTIES}
    if all(value in (None, "") for value in values.values()):
        return None
    missing = [name for name, value in values.items() if value in (None, "")]
    if missing:
        raise _failed(meta, f"the image is partly signed: missing {', '.join(missing)}")
    try:
        verifier = _verifier(ctxt, values, load_certificate)
    except cursive_exc.SignatureVerificationError as exc:
        LOG.error("Image signature verification failed for image %s: %s", meta.id, exc)
        raise _failed(meta, _cursive_reason(exc)) from exc
    return SignatureCheck(meta, verifier)


def _verifier(ctxt: RequestContext, values: dict[str, Any],
              load_certificate: CertificateLoader) -> Any:
    """cursive's ``get_verifier``, with the certificate from ``load_certificate``."""
    signature = signature_utils.get_signature(values[signature_utils.SIGNATURE])
    hash_method = signature_utils.get_hash_method(values[signature_utils.HASH_METHOD])
    key_type = signature_utils.SignatureKeyType.lookup(values[signature_utils.KEY_TYPE])
    cert_uuid = str(values[signature_utils.CERT_UUID])
    public_key = load_certificate(ctxt, cert_uuid).public_key()
    if not isinstance(public_key, key_type.public_key_type):
        raise cursive_exc.SignatureVerificationError(
            reason=f"certificate {cert_uuid} does not hold a {key_type.name} public key")
    verifier = key_type.create_verifier(signature, hash_method, public_key)
    if verifier is None:
        raise cursive_exc.SignatureVerificationError(
            reason="Error occurred while creating the verifier")
    return verifier


def _cursive_reason(exc: cursive_exc.SignatureVerificationError) -> str:
    """cursive's message without its own "Signature verification ... failed:" prefix."""
    message = str(exc)
    prefix = "Signature verification for the image failed: "
    return message[len(prefix):].rstrip(".") if message.startswith(prefix) else message


def _failed(meta: ImageMeta, reason: str) -> exception.ImageSignatureVerificationFailed:
    return exception.ImageSignatureVerificationFailed(image_id=meta.id, reason=reason)
