"""Client side of the compute RPC API (topic ``compute``, server = the compute's host name).

The conductor builds one client per cell transport: each cell's computes listen on their
cell's broker.

API version history:

* 1.0 - Initial version: cache_images
* 1.1 - Added create_instance_disk, delete_instance_disk
* 1.2 - cache_images takes pin_until
* 1.3 - Added get_host_uptime
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.context import RequestContext

TOPIC = "compute"
RPC_API_VERSION = "1.3"

# Keys of the capabilities a compute sends with ``register_service`` (the conductor keeps the
# host's Placement resource provider from them):
#: ``supports_image_type_<disk_format>``: bool, whether this host can boot such an image.
IMAGE_TYPE_CAPABILITY = "supports_image_type_"
#: Placement inventory records by resource class (``VCPU``, ``MEMORY_MB``, ``DISK_GB``).
INVENTORY_CAPABILITY = "inventory"
#: The operator's ``CUSTOM_*`` traits of this host (``[compute] custom_traits``).
CUSTOM_TRAITS_CAPABILITY = "custom_traits"


class ImageResult(TypedDict):
    """What a compute did with one image of a ``cache_images`` call.

    :ivar state: ``cached`` (downloaded now), ``existing`` (already there; touched),
        ``error``, ``unsupported`` (the virt driver keeps no image cache) or ``skipped``
        (with the reason :data:`SKIPPED_DISK`: caching it would bring the cache's free space
        below ``[image_cache] disk_free_floor``).
    :ivar reason: why, for ``error``, ``unsupported`` and ``skipped``.
    :ivar bytes_downloaded: bytes fetched from the image source for it.
    :ivar download_path: for a download, where the bytes came from: ``rbd`` (exported from
        Ceph directly) or ``http`` (the image source). Absent from computes before it existed.
    :ivar fallback_reason: why an image with an ``rbd://`` location was downloaded over HTTP
        (the direct path was refused or failed); absent or None otherwise.
    """

    state: str
    reason: str | None
    bytes_downloaded: int
    download_path: NotRequired[str | None]
    fallback_reason: NotRequired[str | None]


#: The reason of a ``skipped`` image the compute had no room for.
SKIPPED_DISK = "disk"


class InstanceDiskResult(TypedDict):
    """What ``create_instance_disk`` made.

    :ivar backend: the disk backend that created it (``qcow2``, ``raw``, ``flat``, ``rbd``...).
    :ivar path: the disk, ``<instances_path>/<uuid>/disk``, or ``rbd:<pool>/<uuid>_disk``.
    :ivar format: the disk's format (``qcow2`` or ``raw``).
    :ivar base: the cached base image it was made from (``rbd://...`` for an rbd clone).
    :ivar image_fetched: whether the image had to be downloaded first.
    """

    instance_uuid: str
    image_id: str
    backend: str
    path: str
    format: str
    base: str
    image_fetched: bool


class ComputeAPI:
    """Calls into compute agents reachable over ``transport`` (one cell's).

    The version cap is ``[upgrade_levels] compute`` when set, else :data:`RPC_API_VERSION`.
    """

    def __init__(self, conf: cfg.ConfigOpts, transport: messaging.Transport) -> None:
        self.conf = conf
        self.version_cap: str = conf.upgrade_levels.compute or RPC_API_VERSION
        self.client = rpc.get_client(transport, TOPIC, version_cap=self.version_cap)

    def cache_images(
        self, ctxt: RequestContext, host: str, image_ids: list[str],
        pin_until: float | None = None,
    ) -> dict[str, ImageResult]:
        """Have ``host`` cache ``image_ids`` in order; returns each image's outcome.

        :param pin_until: epoch seconds until which the host's ageing pass keeps the images
            (version 1.2); ``None``: no pin.
        :raises RPCVersionCapped: a pin with ``[upgrade_levels] compute`` below 1.2.
        NOTE: a download may take many minutes, so the hard limit is ``long_rpc_timeout``; the
        compute's heartbeats every ``rpc_response_timeout / 2`` (call_monitor_timeout) let a
        dead compute be noticed within ``rpc_response_timeout`` instead.

        :raises MessagingTimeout: when the compute is dead or the hard limit passed.
        """
        # Only a pin needs 1.2: a call without one reaches computes older than that as before.
        kwargs: dict[str, object] = {"image_ids": image_ids}
        version = "1.0"
        if pin_until is not None:
            kwargs["pin_until"], version = float(pin_until), "1.2"
        cctxt = rpc.prepare(
            self.client, "cache_images", version,
            server=host,
            timeout=self.conf.long_rpc_timeout,
            call_monitor_timeout=self.conf.rpc_response_timeout,
            retry=self.conf.rpc_send_retries,
        )
        return cctxt.call(ctxt, "cache_images", **kwargs)  # type: ignore[no-any-return]

    def create_instance_disk(
        self, ctxt: RequestContext, host: str, instance_uuid: str, image_id: str,
        size: int | None = None,
    ) -> InstanceDiskResult:
        """Have ``host`` create the instance's root disk from ``image_id`` (cached first if
        missing) with the backend its configuration picks for the image's format.

        NOTE: the image may have to be downloaded first, so the limits are those of
        ``cache_images``: ``long_rpc_timeout``, with call-monitor heartbeats.

        :param size: bytes; ``None`` keeps the image's virtual size.
        :raises RPCVersionCapped: when ``[upgrade_levels] compute`` is below 1.1.
        :raises InvalidInput: a bad UUID, or a size below the image's virtual size.
        :raises Conflict: the instance already has a disk.
        :raises ImageNotFound, ImageNotAvailable, ImageFetchError, ImageFormatRejected:
        :raises InstanceDisksNotSupported: the host's virt driver or the chosen backend makes
            no disks.
        :raises QemuImgError: the backend could not create the disk (or not in time).
        :raises RbdError: the rbd backend could not create the disk in Ceph.
        :raises ComputeBusy: the host already serves ``[compute] max_concurrent_long_calls``
            long calls; nothing was done.
        """
        cctxt = rpc.prepare(
            self.client, "create_instance_disk", "1.1", server=host,
            timeout=self.conf.long_rpc_timeout,
            call_monitor_timeout=self.conf.rpc_response_timeout,
            retry=self.conf.rpc_send_retries,
        )
        return cctxt.call(  # type: ignore[no-any-return]
            ctxt, "create_instance_disk", instance_uuid=instance_uuid, image_id=image_id,
            size=size,
        )

    def delete_instance_disk(self, ctxt: RequestContext, host: str, instance_uuid: str) -> bool:
        """Have ``host`` remove the instance's directory; returns whether there was one.

        :raises RPCVersionCapped: when ``[upgrade_levels] compute`` is below 1.1.
        :raises InvalidInput: a bad UUID.
        :raises RbdError: the rbd backend could not remove the disk from Ceph.
        """
        cctxt = rpc.prepare(self.client, "delete_instance_disk", "1.1", server=host,
                            retry=self.conf.rpc_send_retries)
        return cctxt.call(  # type: ignore[no-any-return]
            ctxt, "delete_instance_disk", instance_uuid=instance_uuid)

    def get_host_uptime(self, ctxt: RequestContext, host: str) -> str:
        """``host``'s uptime as ``uptime(1)`` prints it (a short call, 1.3).

        :raises RPCVersionCapped: when ``[upgrade_levels] compute`` is below 1.3.
        :raises MessagingTimeout: when the compute does not answer within
            ``rpc_response_timeout``.
        :raises NotImplementedError: (as a ``RemoteError``) when the host cannot tell.
        """
        cctxt = rpc.prepare(self.client, "get_host_uptime", "1.3", server=host,
                            retry=self.conf.rpc_send_retries)
        return cctxt.call(ctxt, "get_host_uptime")  # type: ignore[no-any-return]
