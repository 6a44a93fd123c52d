"""Peer credentials: the short-lived token a compute shows another compute's image server.

The conductor mints a random key per pre-cache job (:func:`new_key`), derives from it one
key per source host (:func:`source_key`), sends each source its own over the RPC bus
(``serve_images``), and gives each receiver, per image and source, an ``Authorization``
value signed with that source's key (:func:`mint`)::

    FleetcachePeer <base64url(JSON claims)>.<base64url(HMAC-SHA256(key, first part))>

The source's image server checks it with :func:`verify`: the signature with the job's key
(constant-time), then that the token names this server, this image, an unexpired time and,
optionally, the connection's source address. Every refusal is a :class:`PeerDenied` whose
``reason`` is one short word of :data:`REASONS`, for metrics and logs; its message never
contains the token. No key lives longer than its job, and no key is ever sent to a peer. A
source knows only its own key: a compromised compute can mint credentials for nothing but
itself, which it serves anyway.

Use::

    key = new_key()
    header = mint(key, PeerClaims(job, image_id, "compute2", "10.0.0.12", "compute1", exp))
    claims = verify(header, {job: key}.get, server="compute1", image_id=image_id,
                    remote_ip="10.0.0.12", check_ip=True)
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import ipaddress
import json
import math
import secrets
import time
from collections.abc import Callable
from typing import Any

SCHEME = "FleetcachePeer"

#: Every reason a :class:`PeerDenied` may carry (the first seven are :func:`verify`'s; the
#: image server adds the last three: ``tls`` is a failed mutual TLS handshake, before any
#: request).
REASONS = (
    "malformed", "unknown_job", "bad_signature", "wrong_server", "wrong_image", "expired",
    "wrong_address", "not_granted", "not_cached", "tls",
)
#: Reasons that mean "no valid credential" (HTTP 401); the others are 403 or 404.
UNAUTHENTICATED = frozenset({"malformed", "unknown_job", "bad_signature", "expired"})

#: A header longer than this is refused unparsed: claims are a few hundred bytes.
_MAX_HEADER = 4096


@dataclasses.dataclass(frozen=True)
class PeerClaims:
    """What a token grants: ``requester`` may read ``image_id`` from ``server`` for ``job``
    until ``expires`` (epoch seconds), from ``requester_ip`` (None: any address)."""

    job: str
    image_id: str
    requester: str
    requester_ip: str | None
    server: str
    expires: float


class PeerDenied(Exception):
    """A peer request refused; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        assert reason in REASONS, reason
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


def new_key() -> str:
    """A fresh random key of 256 bits, as 64 hex characters."""
    return secrets.token_hex(32)


def source_key(job_key: str, server: str) -> str:
    """The key of source host ``server`` in the job whose key is ``job_key``: 64 hex
    characters, as :func:`new_key` (HMAC-SHA256 of the host name under the job's key, so
    that knowing one source's key tells nothing of another's or of the job's)."""
    return hmac.new(job_key.encode("utf-8"), f"source:{server}".encode(),
                    hashlib.sha256).hexdigest()


def mint(key: str, claims: PeerClaims) -> str:
    """The full ``Authorization`` header value carrying ``claims``, signed with ``key``."""
    body = json.dumps(dataclasses.asdict(claims), sort_keys=True, separators=(",", ":"))
    payload = _b64encode(body.encode("utf-8"))
    return f"{SCHEME} {payload}.{_b64encode(_sign(key, payload))}"


def verify(header: str | None, key_for: Callable[[str], str | None], *, server: str,
           image_id: str, remote_ip: str, check_ip: bool,
           now: float | None = None) -> PeerClaims:
    """Check an ``Authorization`` header for a request of ``image_id`` on ``server``.

    :param key_for: the key of a job this server serves, None for an unknown job.
    :param remote_ip: the connection's source address.
    :param check_ip: whether the claims' ``requester_ip`` (when set) must be ``remote_ip``.
    :returns: the verified claims.
    :raises PeerDenied: with the first reason that applies, in the order: malformed,
        unknown_job, bad_signature, wrong_server, wrong_image, expired, wrong_address.
    """
    payload, signature = _split(header)
    claims = _claims(payload)
    key = key_for(claims.job)
    if key is None:
        raise PeerDenied("unknown_job", _shown(claims.job))
    if not hmac.compare_digest(_sign(key, payload), signature):
        raise PeerDenied("bad_signature", f"job {_shown(claims.job)}")
    if claims.server != server:
        raise PeerDenied("wrong_server", f"for {claims.server}, this is {server}")
    if claims.image_id != image_id:
        raise PeerDenied("wrong_image", f"for {claims.image_id}, asked {image_id}")
    if claims.expires <= (time.time() if now is None else now):
        raise PeerDenied("expired", f"at {claims.expires:.0f}")
    if (check_ip and claims.requester_ip is not None
            and canonical_address(claims.requester_ip) != canonical_address(remote_ip)):
        raise PeerDenied("wrong_address", f"{remote_ip} is not {claims.requester_ip}")
    return claims


def _split(header: str | None) -> tuple[str, bytes]:
    """``(payload, signature bytes)`` of the header. :raises PeerDenied: malformed."""
    if not header or len(header) > _MAX_HEADER:
        raise PeerDenied("malformed", "no credential" if not header else "too long")
    scheme, _, token = header.strip().partition(" ")
    payload, dot, signature = token.strip().partition(".")
    if scheme != SCHEME or not dot or not payload or not signature:
        raise PeerDenied("malformed", f"not {SCHEME} <claims>.<signature>")
    return payload, _b64decode(signature)


def _claims(payload: str) -> PeerClaims:
    """The claims of ``payload``, not yet trusted. :raises PeerDenied: malformed."""
    try:
        body: Any = json.loads(_b64decode(payload))
    except (ValueError, RecursionError) as exc:  # a few KiB of "[" recurse past the limit
        raise PeerDenied("malformed", "claims are not JSON") from exc
    fields = {f.name for f in dataclasses.fields(PeerClaims)}
    if not isinstance(body, dict) or set(body) != fields:
        raise PeerDenied("malformed", "claims lack or add fields")
    strings = ("job", "image_id", "requester", "server")
    if (not all(isinstance(body[k], str) for k in strings)
            or not isinstance(body["requester_ip"], (str, type(None)))
            or isinstance(body["expires"], bool)
            or not isinstance(body["expires"], (int, float))
            or not _finite(body["expires"])):
        raise PeerDenied("malformed", "claims of the wrong type")
    return PeerClaims(**body)


def _finite(number: float) -> bool:
    """Whether ``number`` is a finite float: NaN would never expire, and a JSON integer of
    hundreds of digits does not fit a float at all (``OverflowError``)."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False


def _shown(text: str) -> str:
    """A string of claims not verified yet, as a refusal may show it in a log: quoted with
    its control characters escaped (a client may put line breaks there) and cut short."""
    return repr(text[:80])


def canonical_address(text: str) -> str:
    """``text`` spelled as the conductor names hosts, so that two spellings of one address
    compare equal: IPv6 in lower case and compressed, an IPv4-mapped IPv6 address as its
    IPv4 address; ``text`` itself when it is no IP address."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return text
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _sign(key: str, payload: str) -> bytes:
    return hmac.new(key.encode("utf-8"), payload.encode("ascii"), hashlib.sha256).digest()


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise PeerDenied("malformed", "not base64url") from exc
