"""The fleetcache exception tree.

Every error fleetcache raises on purpose derives from :class:`FleetcacheException`, which
formats ``msg_fmt`` with its keyword arguments and carries an HTTP-like ``code``::

    FleetcacheException
    ├── Invalid (400)
    │   ├── InvalidInput
    │   ├── ImageNotAvailable
    │   ├── ImageFormatRejected
    │   ├── ImageSignatureVerificationFailed
    │   ├── InstanceDisksNotSupported
    │   └── InvalidConfiguration
    ├── Forbidden (403)
    │   ├── PolicyNotAuthorized
    │   ├── AggregateMetadataLimitExceeded
    │   └── QuotaExceeded
    ├── NotFound (404)
    │   ├── AggregateNotFound
    │   ├── AggregateHostNotFound
    │   ├── CellNotFound
    │   ├── ComputeHostNotFound
    │   ├── FlavorNotFound
    │   ├── FlavorAccessNotFound
    │   ├── FlavorExtraSpecNotFound
    │   ├── ImageNotFound
    │   ├── InstanceNotFound
    │   └── JobNotFound
    ├── Conflict (409)
    │   ├── AggregateNameExists
    │   ├── AggregateHostExists
    │   ├── AggregateNotEmpty
    │   ├── CellExists
    │   ├── ComputeBusy
    │   ├── FlavorAccessExists
    │   ├── FlavorExists
    │   ├── FlavorIdExists
    │   ├── InstanceInvalidState
    │   └── RPCVersionCapped
    ├── ServiceUnavailable (503)
    │   └── LimitsUnavailable (Keystone's limits could not be read)
    ├── ImageFetchError (a download failed; carries the reason)
    │   ├── ImageChecksumMismatch (the bytes differ from the image's size or hash)
    │   ├── HostOutOfMemory (the download's buffers could not be mapped)
    │   ├── ImageStoreFailed (the bytes came; the file could not be written or converted)
    │   └── DiskFloorReached (the cache's file system would fall below its floor)
    ├── NoValidHost (the scheduler found no host; carries the per-filter summary)
    ├── DiskCreateFailed (an instance disk could not be written: a failed copy, a full disk)
    └── QemuImgError (a qemu-img conversion or disk creation failed)

Exceptions that cross RPC must be built from JSON-serializable keyword arguments only: the
RPC layer re-creates them on the other side from ``kwargs``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class FleetcacheException(Exception):
    """Base of every fleetcache error.

    :param message: overrides ``msg_fmt`` when given.
    :param kwargs: values for ``msg_fmt``; must be JSON-serializable.
    """

    msg_fmt: ClassVar[str] = "An unknown error occurred."
    code: ClassVar[int] = 500
    #: Stable machine-readable code sent in API error bodies; never change or reuse one.
    error_code: ClassVar[str] = "fleetcache.error"

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError):
                message = self.msg_fmt
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


class Invalid(FleetcacheException):
    msg_fmt = "Invalid request: %(reason)s"
    code = 400
    error_code = "fleetcache.invalid"


class InvalidInput(Invalid):
    msg_fmt = "Invalid input: %(reason)s"


class ImageNotAvailable(Invalid):
    msg_fmt = "Image %(image_id)s is not available: %(reason)s"
    error_code = "fleetcache.image.not_available"


class ImageFormatRejected(Invalid):
    """An image's bytes failed format safety inspection; ``reason`` says precisely why."""

    msg_fmt = "Image %(image_id)s was refused by format inspection: %(reason)s"
    error_code = "fleetcache.image.format_rejected"


class ImageSignatureVerificationFailed(Invalid):
    """An image's ``img_signature*`` properties are incomplete or do not match its bytes."""

    msg_fmt = "Signature verification of image %(image_id)s failed: %(reason)s"
    error_code = "fleetcache.image.signature_invalid"


class InvalidConfiguration(Invalid):
    msg_fmt = "Invalid configuration: %(reason)s"
    error_code = "fleetcache.config.invalid"


class InstanceDisksNotSupported(Invalid):
    msg_fmt = "This host cannot create instance disks: %(reason)s"
    error_code = "fleetcache.instance_disks.not_supported"


class Forbidden(FleetcacheException):
    msg_fmt = "Forbidden."
    code = 403
    error_code = "fleetcache.forbidden"


class PolicyNotAuthorized(Forbidden):
    msg_fmt = "Policy doesn't allow %(action)s to be performed."
    error_code = "fleetcache.policy.not_authorized"


class AggregateMetadataLimitExceeded(Forbidden):
    msg_fmt = "Quota exceeded: an aggregate holds at most %(limit)s metadata items."
    error_code = "fleetcache.aggregate.metadata_limit"


class QuotaExceeded(Forbidden):
    """A request would take its project over a limit (Nova's ``TooManyInstances``, 403).

    Each keyword is a comma-separated list with one item per limit exceeded, in the same
    order: ``overs`` the quota names, ``req`` what the request asked, ``used`` what the project
    uses, ``allowed`` its limits.
    """

    msg_fmt = ("Quota exceeded for %(overs)s: Requested %(req)s, but already used %(used)s "
               "of %(allowed)s %(overs)s")
    error_code = "fleetcache.quota.exceeded"
class InstanceMetadataLimitExceeded(Forbidden):
    msg_fmt = "Quota exceeded for metadata_items: a server holds at most %(limit)s."
    error_code = "fleetcache.instance.metadata_limit"


class NotFound(FleetcacheException):
    msg_fmt = "Resource could not be found."
    code = 404
    error_code = "fleetcache.not_found"


class AggregateNotFound(NotFound):
    msg_fmt = "Aggregate %(aggregate_id)s could not be found."
    error_code = "fleetcache.aggregate.not_found"


class AggregateHostNotFound(NotFound):
    msg_fmt = "Cannot remove host %(host)s in aggregate %(aggregate_id)s"
    error_code = "fleetcache.aggregate.host_not_found"


class CellNotFound(NotFound):
    msg_fmt = "Cell %(cell)s could not be found."
    error_code = "fleetcache.cell.not_found"


class ComputeHostNotFound(NotFound):
    msg_fmt = "Compute host %(host)s could not be found."
    error_code = "fleetcache.compute.not_found"


class ImageNotFound(NotFound):
    msg_fmt = "Image %(image_id)s could not be found."
    error_code = "fleetcache.image.not_found"


class FlavorNotFound(NotFound):
    msg_fmt = "Flavor %(flavor_id)s could not be found."
    error_code = "fleetcache.flavor.not_found"


class FlavorAccessNotFound(NotFound):
    msg_fmt = "Flavor access not found for %(flavor_id)s / %(project_id)s combination."
    error_code = "fleetcache.flavor.access_not_found"


class FlavorExtraSpecNotFound(NotFound):
    msg_fmt = "Flavor %(flavor_id)s has no extra specs with key %(key)s."
    error_code = "fleetcache.flavor.extra_spec_not_found"


class InstanceNotFound(NotFound):
    msg_fmt = "Instance %(instance_id)s could not be found."
    error_code = "fleetcache.instance.not_found"


class InstanceMetadataNotFound(NotFound):
    msg_fmt = "Metadata item was not found"
    error_code = "fleetcache.instance.metadata_not_found"


class JobNotFound(NotFound):
    msg_fmt = "Job %(job_id)s could not be found."
    error_code = "fleetcache.job.not_found"


class Conflict(FleetcacheException):
    msg_fmt = "Conflict: %(reason)s"
    code = 409
    error_code = "fleetcache.conflict"


class AggregateNameExists(Conflict):
    msg_fmt = "Aggregate %(name)s already exists."
    error_code = "fleetcache.aggregate.name_exists"


class AggregateHostExists(Conflict):
    msg_fmt = "Aggregate %(aggregate_id)s already has host %(host)s."
    error_code = "fleetcache.aggregate.host_exists"


class AggregateMetadataKeyCase(Conflict):
    msg_fmt = "Metadata key %(key)s differs only in case from the aggregate's key %(existing)s."
    error_code = "fleetcache.aggregate.metadata_key_case"


class AggregateNotEmpty(Conflict):
    msg_fmt = "Aggregate %(aggregate_id)s still has hosts: %(hosts)s."
    error_code = "fleetcache.aggregate.not_empty"


class CellExists(Conflict):
    msg_fmt = "Cell %(name)s already exists."
    error_code = "fleetcache.cell.exists"


class ComputeBusy(Conflict):
    msg_fmt = ("Compute %(host)s is busy: it already serves %(limit)d long calls "
               "([compute] max_concurrent_long_calls); %(method)s was refused, try again later")
    error_code = "fleetcache.compute.busy"


class FlavorAccessExists(Conflict):
    msg_fmt = ("Flavor access already exists for flavor %(flavor_id)s and project "
               "%(project_id)s combination.")
    error_code = "fleetcache.flavor.access_exists"


class FlavorExists(Conflict):
    msg_fmt = "Flavor with name %(name)s already exists."
    error_code = "fleetcache.flavor.name_exists"


class FlavorIdExists(Conflict):
    msg_fmt = "Flavor with ID %(flavor_id)s already exists."
    error_code = "fleetcache.flavor.id_exists"


class InstanceInvalidState(Conflict):
    msg_fmt = ("Cannot '%(action)s' instance %(instance_uuid)s while it is in "
               "%(attr)s %(state)s")
    error_code = "fleetcache.instance.invalid_state"


class RPCVersionCapped(Conflict):
    msg_fmt = ("The %(topic)s RPC API is capped at version %(cap)s ([upgrade_levels] %(topic)s) "
               "but %(method)s needs %(version)s: upgrade every %(topic)s service first.")
    error_code = "fleetcache.rpc.version_capped"


class ServiceUnavailable(FleetcacheException):
    msg_fmt = "A service this request needs is unavailable: %(reason)s"
    code = 503
    error_code = "fleetcache.service_unavailable"


class LimitsUnavailable(ServiceUnavailable):
    msg_fmt = "The quota limits could not be read from Keystone: %(reason)s"
    error_code = "fleetcache.quota.limits_unavailable"


class ImageFetchError(FleetcacheException):
    msg_fmt = "Could not fetch image %(image_id)s: %(reason)s"
    error_code = "fleetcache.image.fetch_failed"


class ImageChecksumMismatch(ImageFetchError):
    """The downloaded bytes differ from the image's size or hash (same message as its base:
    a compute's result reason does not change; the compute's metrics count it apart)."""

    error_code = "fleetcache.image.checksum_mismatch"


class HostOutOfMemory(ImageFetchError):
    """The download could not get the memory for its buffers: this host's failure, not the
    transfer's, so no other source or retry is tried for it."""

    msg_fmt = "Could not fetch image %(image_id)s: this host is out of memory: %(reason)s"
    error_code = "fleetcache.image.host_out_of_memory"


class ImageStoreFailed(ImageFetchError):
    """The image's bytes came and this host could not store them: its file could not be
    written, or the conversion its disk backend asks for failed. Another source of the same
    bytes would meet the same, so none is tried for it."""

    error_code = "fleetcache.image.store_failed"


class DiskFloorReached(ImageFetchError):
    msg_fmt = ("Not caching image %(image_id)s: %(reason)s ([image_cache] disk_free_floor "
               "= %(floor)s)")
    error_code = "fleetcache.image.disk_floor"


class DiskCreateFailed(FleetcacheException):
    msg_fmt = "Could not make disk %(disk)s: %(reason)s"
    error_code = "fleetcache.disk.create_failed"


class RbdError(FleetcacheException):
    msg_fmt = "rbd %(action)s failed: %(reason)s"
    error_code = "fleetcache.rbd.failed"


class QemuImgError(FleetcacheException):
    msg_fmt = "qemu-img %(action)s failed: %(reason)s"
    error_code = "fleetcache.qemu_img.failed"


class PlacementError(FleetcacheException):
    msg_fmt = "Placement %(method)s %(url)s failed: %(reason)s"
    error_code = "fleetcache.placement.failed"


class PlacementGenerationConflict(PlacementError):
    msg_fmt = ("Resource provider %(uuid)s changed in Placement %(attempts)d times while it "
               "was being updated ([placement] generation_conflict_retries)")
    error_code = "fleetcache.placement.generation_conflict"


class NoValidHost(FleetcacheException):
    """No host passed the scheduler for (enough of) a request's instances.

    :ivar filter_summary: ``[(filter name, hosts in, hosts out), ...]`` of the last pass, for
        admins (``Placement`` first: the candidates it returned). Lists after an RPC hop.
    """

    msg_fmt = "No valid host was found. %(reason)s"
    error_code = "fleetcache.scheduler.no_valid_host"

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("reason", "")
        kwargs.setdefault("filter_summary", [])
        super().__init__(message, **kwargs)
        self.filter_summary: list[Any] = [tuple(row) for row in kwargs["filter_summary"]]
