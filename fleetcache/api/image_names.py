"""Image names for the status page: looked up in the image source, remembered, never waited on
for long.

The page names the images of its jobs, but a name is a nicety and the page must load when the
image service is slow or down: an image source's ``show`` retries with back-off
(``[glance] num_retries``) and waits up to ``[glance] request_timeout`` per attempt, far longer
than a page may take. So :class:`ImageNames` looks names up in a small pool of its own
threads and waits for them at most ``wait`` seconds; what is not known by then shows as the
id, and the lookup goes on to serve the next render. Answers are kept (:data:`NAME_TTL`), and
so are failures (:data:`RETRY_AFTER`), so a page reloaded every few seconds sends no request
for an image it already asked about, and a dead image service is asked once a minute per
image, not once per render. One lookup per image is in flight at a time.

Use::

    names = ImageNames(lambda ctxt, image_id: source.show(ctxt, image_id).name)
    names.get(ctxt, ["1111...", "aaaa..."], wait=0.5)   # {"1111...": "cirros"}
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Iterable

from oslo_log import log as logging

from fleetcache.common.context import RequestContext

LOG = logging.getLogger(__name__)

#: Seconds a name found is kept: a rename shows within this time.
NAME_TTL = 600.0
#: Seconds before an image whose lookup failed (unknown, not active, or the source down) is
#: asked about again.
RETRY_AFTER = 60.0
#: Lookups in flight at once: enough for a page's images (ten jobs), few enough that a page
#: never sends the image service a burst.
WORKERS = 4

#: ``lookup(ctxt, image_id)``: the image's name, ``None`` when it has none.
Lookup = Callable[[RequestContext, str], str | None]


class ImageNames:
    """Image id -> name, from ``lookup``, cached; one per API application (its state).

    Callers may rely on :meth:`get` never raising for a failed lookup and never waiting more
    than its ``wait`` for the image service.
    """

    def __init__(self, lookup: Lookup, clock: Callable[[], float] = time.monotonic) -> None:
        self._lookup = lookup
        self._clock = clock
        self._lock = threading.Lock()
        #: image id -> (name or None when the lookup failed, when to ask again)
        self._known: dict[str, tuple[str | None, float]] = {}
        self._pending: dict[str, concurrent.futures.Future[None]] = {}
        # Started on first use: an application built before a fork (gunicorn) has no thread.
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def get(self, ctxt: RequestContext, image_ids: Iterable[str],
            wait: float) -> dict[str, str]:
        """The names known for ``image_ids`` after at most ``wait`` seconds; an image without
        a known name is left out (the caller shows its id).

        :param ctxt: the request's context, whose token the lookups use.
        """
        wanted = list(dict.fromkeys(image_ids))
        with self._lock:
            self._forget_expired()
            futures = [self._pending.get(i) or self._start(ctxt, i)
                       for i in wanted if i not in self._known]
        if futures:
            concurrent.futures.wait(futures, timeout=wait)
        with self._lock:
            return {i: name for i in wanted
                    if (name := self._known.get(i, (None, 0.0))[0]) is not None}

    def _forget_expired(self) -> None:
        now = self._clock()
        for image_id in [i for i, (_, until) in self._known.items() if until <= now]:
            del self._known[image_id]

    def _start(self, ctxt: RequestContext, image_id: str) -> concurrent.futures.Future[None]:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=WORKERS, thread_name_prefix="image-names")
        future = self._pool.submit(self._resolve, ctxt, image_id)
        self._pending[image_id] = future
        return future

    def _resolve(self, ctxt: RequestContext, image_id: str) -> None:
        """Look one image up and remember the answer; the pool's boundary, so it catches
        every error: a name is never worth a failed page or a lost thread."""
        try:
            name = self._lookup(ctxt, image_id) or None
        except Exception as exc:  # noqa: BLE001 - any failure means "show the id"
            LOG.info("No name for image %s on the status page (its id is shown): %s",
                     image_id, exc)
            name = None
        with self._lock:
            ttl = NAME_TTL if name is not None else RETRY_AFTER
            self._known[image_id] = (name, self._clock() + ttl)
            self._pending.pop(image_id, None)
