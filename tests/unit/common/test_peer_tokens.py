"""Peer tokens (fleetcache.common.peer_tokens): one accepted, each denial for its reason."""

from __future__ import annotations

import base64
import dataclasses
import json

import pytest

from fleetcache.common import peer_tokens
from fleetcache.common.peer_tokens import PeerClaims, PeerDenied, mint, new_key, verify

JOB = "5b0f2a1e-7d1c-4f3e-9a2b-0c1d2e3f4a5b"
IMAGE = "a26887c6-c47b-4654-abb5-dfadf7d3f803"
NOW = 1_800_000_000.0
KEY = new_key()
CLAIMS = PeerClaims(job=JOB, image_id=IMAGE, requester="compute2", requester_ip="10.0.0.12",
                    server="compute1", expires=NOW + 60)


def _verify(header: str | None, **kw: object) -> PeerClaims:
    args: dict[str, object] = {"server": "compute1", "image_id": IMAGE,
                               "remote_ip": "10.0.0.12", "check_ip": True, "now": NOW}
    args.update(kw)
    return verify(header, {JOB: KEY}.get, **args)  # type: ignore[arg-type]


def _reason(header: str | None, **kw: object) -> str:
    with pytest.raises(PeerDenied) as info:
        _verify(header, **kw)
    token = (header or "").partition(" ")[2]
    assert not token or token not in str(info.value)  # the token is never echoed
    return info.value.reason


def test_key_is_256_random_bits_in_hex() -> None:
    keys = {new_key() for _ in range(5)}
    assert len(keys) == 5
    assert all(len(k) == 64 and int(k, 16) >= 0 for k in keys)


def test_a_minted_token_verifies_to_its_claims() -> None:
    header = mint(KEY, CLAIMS)
    assert header.startswith("FleetcachePeer ") and header.count(".") == 1
    assert _verify(header) == CLAIMS


def test_missing_or_malformed_credentials_are_malformed() -> None:
    good = mint(KEY, CLAIMS)
    payload = good.split(" ", 1)[1].split(".")[0]
    not_json = base64.urlsafe_b64encode(b"{nope").decode().rstrip("=")
    extra = base64.urlsafe_b64encode(json.dumps(
        {**dataclasses.asdict(CLAIMS), "admin": True}).encode()).decode().rstrip("=")
    for header in (None, "", "Bearer abc", "FleetcachePeer", "FleetcachePeer abc",
                   f"FleetcachePeer {payload}.", f"FleetcachePeer {not_json}.AAAA",
                   f"FleetcachePeer {extra}.AAAA", "FleetcachePeer " + "A" * 5000,
                   good.replace("FleetcachePeer", "fleetcachepeer")):
        assert _reason(header) == "malformed", header


def test_claims_nested_past_the_recursion_limit_are_malformed() -> None:
    deep = base64.urlsafe_b64encode(b"[" * 4000).decode().rstrip("=")
    assert _reason(f"FleetcachePeer {deep}.AAAA") == "malformed"


def test_wrong_types_in_claims_are_malformed() -> None:
    for expires in ("soon", True, float("nan"), float("inf"), 10**400):
        bad = dataclasses.replace(CLAIMS, expires=expires)  # type: ignore[arg-type]
        assert _reason(mint(KEY, bad)) == "malformed", expires


def test_what_an_unverified_token_claims_is_shown_escaped_and_short() -> None:
    for job in ("other\nPeer request from 10.0.0.1 granted", "x" * 1000):
        with pytest.raises(PeerDenied) as info:
            _verify(mint(KEY, dataclasses.replace(CLAIMS, job=job)))
        assert info.value.reason == "unknown_job"
        assert "\n" not in str(info.value) and len(str(info.value)) < 120


def test_a_job_this_server_does_not_serve_is_unknown() -> None:
    assert _reason(mint(KEY, dataclasses.replace(CLAIMS, job="other"))) == "unknown_job"


def test_a_token_signed_with_another_key_or_changed_has_a_bad_signature() -> None:
    assert _reason(mint(new_key(), CLAIMS)) == "bad_signature"
    payload, signature = mint(KEY, CLAIMS).split(" ", 1)[1].split(".")
    forged = dataclasses.replace(CLAIMS, image_id="another", expires=NOW + 10**6)
    forged_payload = mint(KEY, forged).split(" ", 1)[1].split(".")[0]
    assert _reason(f"FleetcachePeer {forged_payload}.{signature}") == "bad_signature"


def test_a_token_for_another_server_image_time_or_address_is_refused() -> None:
    header = mint(KEY, CLAIMS)
    assert _reason(header, server="compute3") == "wrong_server"
    assert _reason(header, image_id="0" * 8 + IMAGE[8:]) == "wrong_image"
    assert _reason(header, now=NOW + 60) == "expired"
    assert _reason(header, remote_ip="10.0.0.99") == "wrong_address"


def test_the_address_is_compared_as_an_address_not_as_a_spelling() -> None:
    v6 = dataclasses.replace(CLAIMS, requester_ip="2001:DB8:0:0::A")
    assert _verify(mint(KEY, v6), remote_ip="2001:db8::a") == v6
    assert _reason(mint(KEY, v6), remote_ip="2001:db8::b") == "wrong_address"
    assert _verify(mint(KEY, CLAIMS), remote_ip="::ffff:10.0.0.12") == CLAIMS
    named = dataclasses.replace(CLAIMS, requester_ip="compute2.example")
    assert _reason(mint(KEY, named), remote_ip="10.0.0.12") == "wrong_address"


def test_the_address_is_not_checked_when_disabled_or_unnamed() -> None:
    assert _verify(mint(KEY, CLAIMS), remote_ip="10.0.0.99", check_ip=False) == CLAIMS
    anywhere = dataclasses.replace(CLAIMS, requester_ip=None)
    assert _verify(mint(KEY, anywhere), remote_ip="10.0.0.99") == anywhere


def test_every_reason_is_known_and_unknown_ones_are_a_bug() -> None:
    assert set(peer_tokens.UNAUTHENTICATED) < set(peer_tokens.REASONS)
    with pytest.raises(AssertionError):
        PeerDenied("because")
