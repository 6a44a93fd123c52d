"""Which jobs this compute serves images to, and with which key: :class:`ServeGrants`.

The conductor opens a grant on a source host with ``serve_images(job, key, image_ids,
until)`` (compute RPC 1.4); the image server (:mod:`~fleetcache.compute.peers.server`) checks
each request's token with the job's key and serves only the images opened for that job, until
their time. Grants live in memory only: a restarted compute serves nothing until the
conductor asks again, which is the safe side (the requester falls back to its next source).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable


@dataclasses.dataclass
class _Grant:
    key: str
    #: image id -> until (epoch seconds).
    images: dict[str, float]


class ServeGrants:
    """The open grants of this compute (thread-safe; expired grants are dropped).

    :param clock: epoch seconds (``time.time``); tests pass their own.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._grants: dict[str, _Grant] = {}

    def open(self, job: str, key: str, image_ids: Iterable[str], until: float) -> None:
        """Serve ``image_ids`` to the holders of ``job``'s tokens until ``until``.

        A second call for the same job and key adds images and extends none beyond its own
        ``until``; a call with another key replaces the job's grant (the old key's tokens
        stop working at once).
        """
        with self._lock:
            self._expire()
            grant = self._grants.get(job)
            if grant is None or grant.key != key:
                grant = self._grants[job] = _Grant(key, {})
            for image_id in image_ids:
                grant.images[image_id] = max(until, grant.images.get(image_id, until))

    def key_for(self, job: str) -> str | None:
        """The key of ``job`` while any of its images is open, else None."""
        with self._lock:
            self._expire()
            grant = self._grants.get(job)
            return grant.key if grant is not None else None

    def allows(self, job: str, image_id: str) -> bool:
        """Whether ``image_id`` is open for ``job`` now."""
        with self._lock:
            self._expire()
            grant = self._grants.get(job)
            return grant is not None and image_id in grant.images

    def jobs(self) -> list[str]:
        """The jobs with an open grant (for logs and tests)."""
        with self._lock:
            self._expire()
            return sorted(self._grants)

    def _expire(self) -> None:
        now = self._clock()
        for job, grant in list(self._grants.items()):
            for image_id, until in list(grant.images.items()):
                if until <= now:
                    del grant.images[image_id]
            if not grant.images:
                del self._grants[job]

