"""Client side of the compute RPC API (topic ``compute``, server = the compute's host name).

The conductor builds one client per cell transport: each cell's computes listen on their
cell's broker.

API version history:

* 1.0 - Initial version: cache_images
* 1.1 - Added create_instance_disk, delete_instance_disk
* 1.2 - cache_images takes pin_until
* 1.3 - Added get_host_uptime
* 1.4 - cache_images takes peers; added serve_images (peer distribution)
* 1.5 - cache_images takes until and bytes_per_second (the call's terms); state paused
* 1.6 - cache_images takes origin_after_refused_peers
* 1.7 - cache_images takes origin_after_failed_peers
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common import rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db import compute_states

TOPIC = "compute"
RPC_API_VERSION = "1.7"
#: The first version whose computes take peers as sources and serve their cache to them.
PEERS_VERSION = "1.4"
#: The first version whose computes take a call's terms: an end time and a rate.
TERMS_VERSION = "1.5"
#: The first version whose computes leave the source after refused peer bytes to the caller.
REFUSED_PEERS_VERSION = "1.6"
#: The first version whose computes leave the source after failed peers to the caller.
FAILED_PEERS_VERSION = "1.7"

# Keys of the capabilities a compute sends with ``register_service`` (the conductor keeps the
# host's Placement resource provider from them):
#: ``supports_image_type_<disk_format>``: bool, whether this host can boot such an image.
IMAGE_TYPE_CAPABILITY = "supports_image_type_"
#: Placement inventory records by resource class (``VCPU``, ``MEMORY_MB``, ``DISK_GB``).
INVENTORY_CAPABILITY = "inventory"
#: The operator's ``CUSTOM_*`` traits of this host (``[compute] custom_traits``).
CUSTOM_TRAITS_CAPABILITY = "custom_traits"
#: The host's image server for peers (:class:`PeerEndpoint`); absent: it serves none.
PEER_CAPABILITY = compute_states.PEER_CAPABILITY


class PeerEndpoint(TypedDict):
    """Where a compute serves its cache to peers, as it reports it at registration.

    :ivar url: ``http://<address>:<port>`` of its image server.
    :ivar group: its ``[image_cache] peer_group`` (empty: the whole cell).
    :ivar address: the address it listens on, which is also where its own requests to
        peers come from (the network of ``peer_listen_address``, not always ``my_ip``'s).
    :ivar not_cached_header: True: its image server names the image in a 404 for an image it
        does not hold (``Fleetcache-Not-Cached``), so a 404 without it is no such answer.
        Absent: a server from before that header, whose every 404 is read as the image's
        absence.
    """

    url: str
    group: str
    address: NotRequired[str]
    not_cached_header: NotRequired[bool]


class Peer(TypedDict):
    """One source a conductor gives a compute for one image: a host of its peer group that
    holds it, and the credential the conductor issued for this job, image and pair of hosts
    (the ``Authorization`` header's value, :mod:`fleetcache.common.peer_tokens`).

    ``not_cached_header`` (optional, no version of its own: a compute that does not know it
    ignores it) is True when the source reported that its image server names the image in
    a 404 for an image it does not hold (:attr:`PeerEndpoint.not_cached_header`)."""

    host: str
    url: str
    authorization: str
    not_cached_header: NotRequired[bool]


class ImageResult(TypedDict):
    """What a compute did with one image of a ``cache_images`` call.

    :ivar state: ``cached`` (downloaded now), ``existing`` (already there; touched),
        ``error``, ``unsupported`` (the virt driver keeps no image cache), ``skipped``
        (with the reason :data:`SKIPPED_DISK`: caching it would bring the cache's free space
        below ``[image_cache] disk_free_floor``) or ``paused`` (1.5: the call's ``until``
        came first; what was downloaded is kept for the next call, which resumes it; an
        image not started by then is ``paused`` with 0 bytes).
    :ivar reason: why, for ``error``, ``unsupported``, ``skipped`` and ``paused``
        (``paused at the call's end time: 12.0 of 32.0 MiB kept``).
    :ivar bytes_downloaded: bytes fetched from the image source for it by this call.
    :ivar bytes_resumed: bytes of it an earlier, paused call had downloaded, re-read and
        checked by this one (1.5; absent: none).
    :ivar download_path: for a download, where the bytes came from: ``rbd`` (exported from
        Ceph directly), ``http`` (the image source) or ``peer`` (hosts of its peer group
        only). Absent from computes before it existed.
    :ivar fallback_reason: why an image with an ``rbd://`` location was downloaded over HTTP
        (the direct path was refused or failed), or why a host given peers fetched (some of)
        the image from the image service; absent or None otherwise.
    :ivar source_host: the peer that sent the image's bytes (1.4).
    :ivar bytes_from_peers: of ``bytes_downloaded``, those peers sent (1.4).
    :ivar bad_peers: peers whose bytes failed verification (1.4; the conductor stops using
        them as sources for a while).
    :ivar failed_peers: present (1.7, ``origin_after_failed_peers`` False) when the image
        comes back ``error`` because its peers all failed and the call left the next source
        to the conductor: those that failed in transport (not those that only asked to be
        asked again, nor those in ``absent_peers``). The bytes written are kept: a next
        call from the image service resumes them; one from peers starts again from byte 0.
    :ivar absent_peers: peers that only answered that they do not hold the image (a 404
        that says so: a converted or aged-out base, a download that ended); not in
        ``failed_peers``: the conductor stops naming them for this image only. Given with
        ``cached``, ``paused``, and an ``error`` whose peer bytes were refused or whose peers
        all failed (1.6, 1.7). Absent: none (or a compute from before it).
    """

    state: str
    reason: str | None
    bytes_downloaded: int
    download_path: NotRequired[str | None]
    fallback_reason: NotRequired[str | None]
    source_host: NotRequired[str | None]
    bytes_from_peers: NotRequired[int | None]
    bad_peers: NotRequired[list[str]]
    bytes_resumed: NotRequired[int]
    failed_peers: NotRequired[list[str]]
    absent_peers: NotRequired[list[str]]


#: The state of an image whose download the call's end time stopped, or never let start.
PAUSED = "paused"
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

    @property
    def takes_peers(self) -> bool:
        """Whether the version cap lets computes be given peers (1.4)."""
        return bool(self.client.can_send_version(PEERS_VERSION))

    @property
    def takes_terms(self) -> bool:
        """Whether the version cap lets calls carry an end time and a rate (1.5)."""
        return bool(self.client.can_send_version(TERMS_VERSION))

    @property
    def reports_refused_peers(self) -> bool:
        """Whether the version cap lets calls leave the source after refused peer bytes to
        the conductor (1.6)."""
        return bool(self.client.can_send_version(REFUSED_PEERS_VERSION))

    @property
    def reports_failed_peers(self) -> bool:
        """Whether the version cap lets calls leave the source after failed peers to the
        conductor (1.7)."""
        return bool(self.client.can_send_version(FAILED_PEERS_VERSION))

    def cache_images(
        self, ctxt: RequestContext, host: str, image_ids: list[str],
        pin_until: float | None = None, peers: dict[str, list[Peer]] | None = None,
        until: float | None = None, bytes_per_second: int | None = None,
        origin_after_refused_peers: bool = True,
        origin_after_failed_peers: bool = True,
    ) -> dict[str, ImageResult]:
        """Have ``host`` cache ``image_ids`` in order; returns each image's outcome.

        :param pin_until: epoch seconds until which the host's ageing pass keeps the images
            (version 1.2); ``None``: no pin.
        :param peers: per image, the peers to fetch it from before the image service
            (version 1.4); ``None`` or empty: from the image service.
        :param until: epoch seconds at which downloads still under way stop, their bytes
            kept for the next call (state ``paused``; version 1.5); ``None``: no end.
        :param bytes_per_second: the pace of this call's downloads, on top of the host's
            ``[image_cache] max_download_bytes_per_second`` (version 1.5); ``None``: the
            host's cap only.
        :param origin_after_refused_peers: False: an image whose peer bytes a check refused
            comes back ``error`` with ``bad_peers`` instead of being fetched again from the
            image service (version 1.6); True: as before 1.6.
        :param origin_after_failed_peers: False: an image whose peers all failed comes
            back ``error`` with ``failed_peers``, its bytes kept for a next call from the
            image service, instead of being fetched from the image service (version 1.7);
            True: as before 1.7.
        :raises RPCVersionCapped: a pin with ``[upgrade_levels] compute`` below 1.2, peers
            below 1.4, an end time or a rate below 1.5, ``origin_after_refused_peers`` False
            below 1.6, ``origin_after_failed_peers`` False below 1.7.
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
        if peers:
            kwargs["peers"], version = peers, PEERS_VERSION
        if until is not None:
            kwargs["until"], version = float(until), TERMS_VERSION
        if bytes_per_second is not None:
            kwargs["bytes_per_second"], version = int(bytes_per_second), TERMS_VERSION
        if not origin_after_refused_peers:
            kwargs["origin_after_refused_peers"], version = False, REFUSED_PEERS_VERSION
        if not origin_after_failed_peers:
            kwargs["origin_after_failed_peers"], version = False, FAILED_PEERS_VERSION
        cctxt = rpc.prepare(
            self.client, "cache_images", version,
            server=host,
            timeout=self.conf.long_rpc_timeout,
            call_monitor_timeout=self.conf.rpc_response_timeout,
            retry=self.conf.rpc_send_retries,
        )
        return cctxt.call(ctxt, "cache_images", **kwargs)  # type: ignore[no-any-return]

    def serve_images(self, ctxt: RequestContext, host: str, job_uuid: str, key: str,
                     image_ids: list[str], until: float) -> list[str]:
        """Have ``host`` serve ``image_ids`` to the peers of job ``job_uuid`` until ``until``
        (epoch seconds), checking their credentials with ``key`` (a short call, 1.4).

        :returns: the images it serves: those it holds with their own bytes (a base it
            converted is not the image's bytes), pinned until ``until``.
        :raises RPCVersionCapped: when ``[upgrade_levels] compute`` is below 1.4.
        :raises MessagingTimeout: when the compute does not answer within
            ``rpc_response_timeout``.
        """
        cctxt = rpc.prepare(self.client, "serve_images", PEERS_VERSION, server=host,
                            retry=self.conf.rpc_send_retries)
        return cctxt.call(  # type: ignore[no-any-return]
            ctxt, "serve_images", job_uuid=job_uuid, key=key, image_ids=image_ids,
            until=float(until))

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
