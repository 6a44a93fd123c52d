"""Unit tests of image signature verification (fleetcache.image.signature) with real keys."""

from __future__ import annotations

import os

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.image import signature
from fleetcache.image.source import ImageMeta
from tests.unit.image.fixtures import make_conf
from tests.unit.image.signing import Signer

CTXT = RequestContext()
DATA = os.urandom(300_000)
ON = make_conf(glance__verify_glance_signatures=True)


def _check(signer: Signer, props: dict[str, str],
           conf: object = ON) -> signature.SignatureCheck | None:
    meta = ImageMeta(id="img-1", properties=props)
    return signature.signature_check(conf, CTXT, meta,  # type: ignore[arg-type]
                                     load_certificate=signer.load_certificate)


def _feed(check: signature.SignatureCheck | None, data: bytes, step: int = 65536) -> None:
    assert check is not None
    for i in range(0, len(data), step):
        check.feed(data[i:i + step])
    check.finish("/unused")


@pytest.mark.parametrize("key_type,hash_method", [("RSA-PSS", "SHA-256"), ("RSA-PSS", "SHA-512"),
                                                  ("ECC_SECP384R1", "SHA-256")])
def test_good_signature_over_the_streamed_bytes_passes(key_type: str, hash_method: str) -> None:
    signer = Signer(key_type)
    _feed(_check(signer, signer.properties(DATA, hash_method)), DATA)
    assert signer.loaded == [signer.cert_uuid]


def test_one_changed_byte_fails_with_a_clear_reason() -> None:
    signer = Signer()
    check = _check(signer, signer.properties(DATA))
    with pytest.raises(exception.ImageSignatureVerificationFailed,
                       match=r"Signature verification of image img-1 failed: the signature "
                             r"does not match the image's 300000 bytes \(RSA-PSS, SHA-256, "
                             r"certificate "):
        _feed(check, DATA[:-1] + bytes([DATA[-1] ^ 1]))


def test_signature_by_another_key_fails() -> None:
    signer, other = Signer(), Signer()
    props = {**signer.properties(DATA), "img_signature": other.sign(DATA)}
    with pytest.raises(exception.ImageSignatureVerificationFailed, match="does not match"):
        _feed(_check(signer, props), DATA)


def test_option_off_means_no_verification() -> None:
    signer = Signer()
    assert _check(signer, signer.properties(DATA), make_conf()) is None
    assert signer.loaded == []


def test_unsigned_image_is_not_verified() -> None:
    assert _check(Signer(), {"hw_disk_bus": "virtio"}) is None


@pytest.mark.parametrize("dropped", ["img_signature", "img_signature_hash_method",
                                     "img_signature_key_type", "img_signature_certificate_uuid"])
def test_partly_signed_image_fails_before_download(dropped: str) -> None:
    signer = Signer()
    props = signer.properties(DATA)
    del props[dropped]
    with pytest.raises(exception.ImageSignatureVerificationFailed,
                       match=f"the image is partly signed: missing {dropped}$"):
        _check(signer, props)
    assert signer.loaded == []


@pytest.mark.parametrize("field,value,reason", [
    ("img_signature", "not base64!", "The signature data was not properly encoded using base64"),
    ("img_signature_hash_method", "MD5", "Invalid signature hash method: MD5"),
    ("img_signature_key_type", "ROT13", "Invalid signature key type: ROT13"),
    ("img_signature_certificate_uuid", "00000000-0000-0000-0000-000000000000",
     "Certificate not found with ID: 00000000-0000-0000-0000-000000000000"),
    ("img_signature_key_type", "DSA", "certificate .* does not hold a DSA public key"),
])
def test_invalid_properties_fail_before_download(field: str, value: str, reason: str) -> None:
    signer = Signer()
    props = {**signer.properties(DATA), field: value}
    with pytest.raises(exception.ImageSignatureVerificationFailed, match=f"failed: {reason}$"):
        _check(signer, props)
