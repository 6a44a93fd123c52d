"""An image of a host with peers asked of the sources the planner names in turn, while a
call hands it back (compute RPC 1.6: peer bytes a check refused; 1.7: every peer failed, the
bytes kept), and the one result that counts every call's bytes once.

The host call (:mod:`~.hostcall`) and ``bench/p2p.py`` both ask through
:func:`from_sources_in_turn`::

    result = from_sources_in_turn(ask, client.reports_refused_peers,
                                  client.reports_failed_peers)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Literal

from fleetcache.compute.rpcapi import ImageResult

LOG = logging.getLogger(__name__)


#: Calls for one image of a host with peers: its first source, then as many as a refused
#: or failed source hands back (the last fetches from the image service after them itself).
MAX_SOURCES = 3


def from_sources_in_turn(ask: Callable[[bool, bool], tuple[ImageResult, int]],
                         reports_refused: bool, reports_failed: bool,
                         what: str = "") -> ImageResult:
    """An image's result from ``ask(report_refused, hand_back)`` (one call with the source
    the planner names), asked again while a call hands the image back, at most
    :data:`MAX_SOURCES` times, each result after the first counting the ones before.

    :param reports_refused: whether the compute may give back refused peer bytes (1.6),
        and ``reports_failed``: an image whose peers all failed (1.7).
    """
    refused_before = False
    reply, _ = ask(reports_refused, reports_failed)
    latest = reply  # the last call's own reply (the merged one names earlier peers too)
    for calls in range(2, MAX_SOURCES + 1):
        back = handed_back(latest)
        if back is None:
            break
        refused_before = refused_before or back == "refused"
        last = calls == MAX_SOURCES
        LOG.info("%s: %s peers %s; assigning another source", what, back,
                 ", ".join(latest.get("bad_peers") or [*(latest.get("failed_peers") or []),
                                                      *(latest.get("absent_peers") or [])]))
        # A second refusal is the compute's to settle, from the image service (as 1.4).
        latest, resumed = ask(reports_refused and not last and not refused_before,
                              reports_failed and not last)
        reply = after_handed_back(reply, latest, resumed)
    return reply


def handed_back(reply: ImageResult) -> str | None:
    """Whether ``reply`` gives the image back to the conductor: ``refused`` (peer bytes a
    check refused, RPC 1.6: ``error`` naming the peers, nothing fetched from the image
    service after them), ``failed`` (every peer failed in transport, 1.7: ``error`` naming
    them, the bytes kept for the next call), else None."""
    if reply["state"] != "error":
        return None
    if reply.get("bad_peers"):
        return "refused"
    if isinstance(reply.get("failed_peers"), list):
        return "failed"
    return None


def resumed_bytes(replies: Mapping[str, ImageResult], image_id: str) -> int:
    """The bytes of ``image_id`` its call took from its paused download (1.5; 0: none)."""
    reply = replies.get(image_id) if isinstance(replies, Mapping) else None
    value = reply.get("bytes_resumed") if isinstance(reply, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _named_once(first: ImageResult, second: ImageResult,
                field: Literal["bad_peers", "failed_peers", "absent_peers"]) -> list[str]:
    """The hosts ``field`` names in ``first`` then ``second``, each once, in order."""
    return list(dict.fromkeys([*(first.get(field) or []), *(second.get(field) or [])]))


def after_handed_back(back: ImageResult, second: ImageResult, resumed: int = 0) -> ImageResult:
    """The image's result after the next source: ``second``'s, counting the bytes the call
    that handed it back fetched (dropped if refused; resumed by ``second`` if kept: its
    ``resumed`` bytes are counted once) and naming the peers that failed and why, and those
    that did not hold the image."""
    bad = _named_once(back, second, "bad_peers")
    failed = _named_once(back, second, "failed_peers")
    absent = _named_once(back, second, "absent_peers")
    handed = "failed_peers" in back or "failed_peers" in second
    merged = ImageResult(**{
        **second,
        "bytes_downloaded": back["bytes_downloaded"] + second["bytes_downloaded"]
        - min(resumed, second["bytes_downloaded"]),
        "bytes_from_peers": (back.get("bytes_from_peers") or 0)
        + (second.get("bytes_from_peers") or 0),
        "bad_peers": bad,
        "fallback_reason": second.get("fallback_reason") or back.get("fallback_reason"),
    })
    if handed:
        merged["failed_peers"] = failed
    if absent:
        merged["absent_peers"] = absent
    return merged
