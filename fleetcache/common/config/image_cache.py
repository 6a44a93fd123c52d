"""Options of the ``[image_cache]`` group (names and defaults as Nova's)."""

from __future__ import annotations

from oslo_config import cfg

image_cache_group = cfg.OptGroup("image_cache", title="Image cache options")

image_cache_opts: list[cfg.Opt] = [
    cfg.IntOpt(
        "manager_interval",
        default=2400,
        min=-1,
        help="""
Seconds between two runs of the image cache manager, which ages out unused base images.

Each run also reports the cache's images and disk usage to the conductor. The first run,
at start-up, only reports; the first ageing pass comes one interval later.

Possible values:
* 0: run at the default rate (every 60 seconds).
* -1: disable the manager.
* Any other value: the interval in seconds.

Related options:
* ``remove_unused_base_images``
* ``remove_unused_original_minimum_age_seconds``
""",
    ),
    cfg.StrOpt(
        "subdirectory_name",
        default="_base",
        help="Directory under ``instances_path`` that holds cached base images.",
    ),
    cfg.BoolOpt(
        "remove_unused_base_images",
        default=True,
        help="""
Whether the cache manager removes base images that no instance disk uses.

A base image is in use while a qcow2 instance disk on this host has it as its backing file;
raw and flat disks are copies and do not use their base after creation.

Related options:
* ``remove_unused_original_minimum_age_seconds``
""",
    ),
    cfg.IntOpt(
        "remove_unused_original_minimum_age_seconds",
        default=86400,
        min=0,
        help="""
Seconds an unused base image must go untouched before the cache manager removes it.

Pre-caching an image, or creating an instance disk from it, touches it and so renews this
lease.

Related options:
* ``manager_interval``
* ``remove_unused_base_images``
""",
    ),
    cfg.IntOpt(
        "partial_keep_seconds",
        default=2 * 86400,
        min=0,
        help="""
Seconds a paused download is kept for the next request of its image to resume.

A pre-cache request with an end time stops the downloads still under way at that time and
keeps what they wrote beside the cache's temporary files; the next request for the image
re-reads and checks those bytes, then downloads only the rest. The cache manager removes a
paused download last written longer ago than this (whether or not base images are
removed); it is never listed, reported or served to peers.

Possible values:
* 0: paused downloads are removed at the next pass.
* A positive integer: seconds.

Related options:
* ``manager_interval``
""",
    ),
    cfg.IntOpt(
        "precache_concurrency",
        default=1,
        min=1,
        help="""
Maximum number of compute hosts the conductor asks to pre-cache images in parallel.

The limit holds across all pre-cache jobs of one conductor. Higher values finish a job
sooner but load the image service harder.
""",
    ),
    cfg.IntOpt(
        "max_concurrent_downloads_per_image",
        default=0,
        min=0,
        help="""
Maximum number of compute hosts downloading the same image from the image service at once,
across every conductor.

Conductors take a lease in the database (table ``download_leases``) before they ask a host to
cache an image, so the limit holds whatever the number of conductors and jobs. A host waiting
for a lease is shown ``waiting`` in its job and is not asked (nor timed out) until it has one.

Possible values:
* 0: no limit per image.
* A positive integer: the limit.

Related options:
* ``max_concurrent_downloads``
* ``download_lease_seconds``
""",
    ),
    cfg.IntOpt(
        "max_concurrent_downloads",
        default=0,
        min=0,
        help="""
Maximum number of image downloads from the image service at once, all images together,
across every conductor.

Counted with the same database leases as ``max_concurrent_downloads_per_image``.

Possible values:
* 0: no overall limit.
* A positive integer: the limit.

Related options:
* ``max_concurrent_downloads_per_image``
* ``download_lease_seconds``
""",
    ),
    cfg.IntOpt(
        "download_lease_seconds",
        default=60,
        min=3,
        help="""
Seconds a download lease lives unless its conductor renews it.

A conductor renews the leases of its calls in flight every third of this time, so a lease
outlives its holder by at most this long when the conductor dies: until then the slot stays
taken.

Related options:
* ``max_concurrent_downloads_per_image``
* ``max_concurrent_downloads``
""",
    ),
    cfg.IntOpt(
        "max_download_bytes_per_second",
        default=0,
        min=0,
        help="""
Bandwidth cap of one compute host's image downloads from the image service, in bytes per
second, shared by all the downloads of the host.

Possible values:
* 0: no cap.
* A positive integer: the cap (a token bucket allows bursts of a twentieth of a second's
  worth; the downloads read in small chunks through small socket buffers, so that the image
  service sees the cap too, not only the compute).
""",
    ),
    cfg.StrOpt(
        "disk_free_floor",
        default="0",
        help="""
Free space the image cache's file system must keep: a compute does not cache an image that
would bring the free space below it.

The image's size (and, when the disk backend converts it, its virtual size) is checked before
the download starts, and the free space is checked again while the bytes are written; a
refused image is answered ``skipped`` with the reason ``disk`` and nothing of it is left.

Possible values:
* ``0``: no floor.
* Bytes, with an optional unit (``500M``, ``2G``, ``1GiB``).
* A percentage of the file system's size (``10%``).
""",
    ),
    cfg.IntOpt(
        "catch_up_window",
        default=0,
        min=0,
        help="""
Seconds after a pre-cache job's creation during which hosts it could not ask are caught up.

A host that is down or disabled when the job reaches it is shown ``pending`` (reason ``down``
or ``disabled``) instead of ``skipped``, and is asked as soon as it is up and enabled again
(its registration or heartbeat reaching the job's conductor, or within
``catch_up_interval``). A host added to the aggregate while the window is open becomes
``pending`` too and is asked the same way. The job stays ``catching_up`` until no host is
pending, then ends ``done``; when the window closes first, the hosts still pending end
``skipped`` with the reason saying so.

Possible values:
* 0: no catch-up, as Nova: a host that is down or disabled is ``skipped`` for good.
* Any other value: the window in seconds (for example 86400, one day, as Nova's image TTL).

Related options:
* catch_up_interval
""",
    ),
    cfg.IntOpt(
        "catch_up_interval",
        default=10,
        min=1,
        help="""
Seconds between two passes of the conductor over its pending hosts: those that are up and
enabled again are asked, and jobs whose catch-up window closed are ended.

Related options:
* catch_up_window
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(image_cache_group)
    conf.register_opts(image_cache_opts, group=image_cache_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(image_cache_group, image_cache_opts)]
