"""Where images come from: image sources (Glance over HTTP, a local directory) and the
one-pass verification of their bytes.

The compute imports from here only the public names below; sources are loaded by name with
:func:`load_image_source` (entry point group ``fleetcache.image.sources``).
"""

from __future__ import annotations

from fleetcache.image.source import ImageMeta, ImageSource, ProgressCallback, load_image_source
from fleetcache.image.verify import ImageVerifier, download_verified

__all__ = [
    "ImageMeta",
    "ImageSource",
    "ImageVerifier",
    "ProgressCallback",
    "download_verified",
    "load_image_source",
]
