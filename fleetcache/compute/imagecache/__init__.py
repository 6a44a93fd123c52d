"""The compute's image cache: what other code of the compute, ``cmd``, ``demo`` and ``bench/``
use of it.

* :mod:`~fleetcache.compute.imagecache.layout`: where cached images, downloads under way,
  locks and index records live on disk (Nova's layout);
* :mod:`~fleetcache.compute.imagecache.cache`: :class:`ImageCache`, the single-flight fetch
  under the image's lock (from peers too, :mod:`fleetcache.compute.peers`), touch on a hit,
  listing, partial downloads, which bases peers may be sent; the one writer of its index;
* :mod:`~fleetcache.compute.imagecache.download`: one checked download (size, multihash,
  the download checks, format safety in one pass) and its publication as a cached base;
* :mod:`~fleetcache.compute.imagecache.download_paths`: the paths a download takes (peers,
  Ceph's direct path, the image source) and the fallbacks between them;
* :mod:`~fleetcache.compute.imagecache.terms`: a call's end time and rate for its downloads,
  :class:`DownloadPaused`;
* :mod:`~fleetcache.compute.imagecache.paused`: paused downloads kept for the next call and
  resumed through the checks;
* :mod:`~fleetcache.compute.imagecache.direct`: the direct path from Ceph (``rbd://``
  locations), an image source streaming the privileged ``rbd export``;
* :mod:`~fleetcache.compute.imagecache.files`: early writeback, quiet unlink, directory fsync;
* :mod:`~fleetcache.compute.imagecache.locks`: the locks of cache files and instance disks,
  against this process's threads and other processes;
* :mod:`~fleetcache.compute.imagecache.index`: :class:`CacheIndex`, which image each cache
  file holds;
* :mod:`~fleetcache.compute.imagecache.ageing`: :class:`ImageCacheManager`, the periodic
  ageing pass and the cache report.
"""

from __future__ import annotations

from fleetcache.compute.imagecache.ageing import (
    DEFAULT_INTERVAL,
    CachedImage,
    ImageCacheManager,
    PassResult,
    ReportFunc,
    manager_interval,
)
from fleetcache.compute.imagecache.cache import CacheEntry, CacheOutcome, ImageCache
from fleetcache.compute.imagecache.direct import RbdDirect, RbdExportSource, Route
from fleetcache.compute.imagecache.download import (
    CheckFactory,
    DownloadCheck,
    Published,
    publish,
    require_disk_format,
)
from fleetcache.compute.imagecache.download_paths import PeerBytesRefused, PeersGone
from fleetcache.compute.imagecache.files import EarlyWriteback, fsync_dir
from fleetcache.compute.imagecache.index import CacheIndex, IndexRecord
from fleetcache.compute.imagecache.layout import (
    PART_MARK,
    PAUSED_MARK,
    cache_name,
    is_partial,
)
from fleetcache.compute.imagecache.locks import named_lock
from fleetcache.compute.imagecache.terms import DownloadPaused, DownloadTerms

__all__ = [
    "PeerBytesRefused",
    "PeersGone",
    "DEFAULT_INTERVAL",
    "PART_MARK",
    "PAUSED_MARK",
    "CacheEntry",
    "CacheIndex",
    "CacheOutcome",
    "CachedImage",
    "CheckFactory",
    "DownloadCheck",
    "DownloadPaused",
    "DownloadTerms",
    "EarlyWriteback",
    "ImageCache",
    "ImageCacheManager",
    "IndexRecord",
    "PassResult",
    "Published",
    "RbdDirect",
    "RbdExportSource",
    "ReportFunc",
    "Route",
    "cache_name",
    "fsync_dir",
    "is_partial",
    "manager_interval",
    "named_lock",
    "publish",
    "require_disk_format",
]
