"""Instance disks: the root disk of an instance, made from the image cache by the disk backend.

``create`` makes ``<instances_path>/<uuid>/disk`` from image ``image_id``:

1. the backend is what :func:`~fleetcache.compute.imagebackend.choose` picks for the image's
   ``disk_format`` (``[libvirt] images_type_mapping``, else ``images_type``); an image without
   one is refused by the cache's own rule
   (:func:`~fleetcache.compute.imagecache.require_disk_format`);
2. the image comes from the cache, fetched once if missing (:meth:`ImageCache.fetch`: the
   per-image lock, single flight, touch on a hit);
3. under the same per-image lock the base is checked to be still there (the ageing pass may
   have removed it since), its format is read from the cache
   (:meth:`ImageCache.base_format`), the disk is created, and the base is touched again, so
   the ageing pass either sees the new disk or sees a base younger than its cutoff;
4. ``<uuid>/disk.json`` (:mod:`~fleetcache.compute.disk_record`) records what the disk was
   made from (image, backend, disk format, base and its format). The ageing pass reads it to
   pass ``-f`` to ``qemu-img`` from what fleetcache wrote, never from what a disk's header
   claims.

The ``rbd`` backend keeps the disk in Ceph (:mod:`~fleetcache.compute.imagebackend.rbd_disks`):
a raw image Glance stores in the same cluster is cloned from Glance's snapshot without
touching the cache (step 2 is skipped; ``disk.json`` names the ``rbd://`` parent), any other is
imported from its cached base (through a raw copy when the base is not raw, e.g. a qcow2 base
cached before qcow2 images were mapped to rbd); ``delete`` removes the Ceph image before the
directory.

A create whose process died after ``disk.json`` but before its disk existed leaves a record
without a disk; the next create of that instance removes it first
(:meth:`InstanceDisks._forget_unmade_disk` says when a record may go).

Instances are serialized by their own lock (``fleetcache-instance-<uuid>``), so a create and a
delete of one instance never interleave. The UUID is checked strictly (canonical form only),
which is also what keeps it from naming any other path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.compute import imagebackend
from fleetcache.compute.disk_record import (
    DISK_NAME,
    RECORD_NAME,
    DiskRecord,
    read_record,
    write_record,
)
from fleetcache.compute.imagebackend.rbd_disks import RbdDisks
from fleetcache.compute.imagecache import ImageCache, named_lock, require_disk_format
from fleetcache.compute.rpcapi import InstanceDiskResult
from fleetcache.image import format_safety, qemu
from fleetcache.image.rbd_location import RbdLocation

LOG = logging.getLogger(__name__)

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Fetches tried when the ageing pass keeps removing the base between fetch and lock.
MAX_FETCH_ATTEMPTS = 3


def validate_uuid(value: object) -> str:
    """``value`` in canonical form (lower-case, dashed); anything else is refused.

    :raises InvalidInput: when ``value`` is not exactly a canonical UUID string.
    """
    if not isinstance(value, str) or not _UUID.fullmatch(value.lower()):
        raise exception.InvalidInput(reason=f"instance uuid {value!r} is not a UUID")
    return value.lower()


class InstanceDisks:
    """Creates and deletes instance disks on one host, from its image cache."""

    def __init__(self, conf: cfg.ConfigOpts, cache: ImageCache,
                 rbd: RbdDisks | None = None) -> None:
        """:param rbd: the rbd backend's pool (built from ``conf`` when not given)."""
        self.conf = conf
        self.cache = cache
        self.rbd = rbd or RbdDisks(conf)

    def create(self, ctxt: RequestContext, instance_uuid: str, image_id: str,
               size: int | None = None) -> InstanceDiskResult:
        """Create the instance's disk from ``image_id`` (cached first when missing).

        :param size: bytes; ``None`` keeps the image's virtual size.
        :raises InvalidInput: a bad UUID or size, or a size below the image's virtual size.
        :raises Conflict: the instance already has a disk (or a record of one that cannot
            be shown never to have come into being).
        :raises ImageNotFound, ImageNotAvailable, ImageFetchError, ImageFormatRejected:
        :raises InstanceDisksNotSupported: the backend chosen is not implemented (checked
            before anything is fetched).
        :raises QemuImgError: the backend could not create the disk.
        :raises RbdError: Ceph refused or could not be reached (rbd backend).
        """
        uuid = validate_uuid(instance_uuid)
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                                 or size <= 0):
            raise exception.InvalidInput(reason=f"disk size {size!r} is not a positive integer")
        meta = self.cache.source.show(ctxt, image_id)
        disk_format = require_disk_format(meta)
        plan = imagebackend.choose(self.conf, disk_format)
        if not imagebackend.get_backend(plan.backend, self.conf).implemented:
            raise exception.InstanceDisksNotSupported(
                reason=f"the {plan.backend} disk backend chosen for {disk_format} images "
                "is not implemented yet")
        with self._instance_lock(uuid):
            directory = imagebackend.instance_dir(self.conf, uuid)
            self._forget_unmade_disk(uuid, directory)
            if any(os.path.lexists(os.path.join(directory, name))
                   for name in (DISK_NAME, RECORD_NAME)):
                raise exception.Conflict(reason=f"instance {uuid} already has a disk")
            if plan.backend == "rbd":
                parent = self.rbd.cloneable(meta, plan.source_format)
                if parent is not None:
                    return self._clone(uuid, image_id, parent, size)
            fetched = False
            for _attempt in range(MAX_FETCH_ATTEMPTS):
                fetched = self.cache.fetch(ctxt, image_id).downloaded or fetched
                with self.cache.lock(image_id):
                    base = self.cache.path_for(image_id)
                    if not os.path.exists(base):
                        LOG.info("Image %s left the cache before its disk was made; "
                                 "fetching it again", image_id)
                        continue
                    result = self._create_locked(uuid, image_id, plan, base, size, fetched)
                return result
        raise exception.ImageFetchError(
            image_id=image_id, reason=f"it left the cache {MAX_FETCH_ATTEMPTS} times before "
            "the disk could be made from it")

    def delete(self, instance_uuid: str) -> bool:
        """Remove the instance's directory (and its rbd disk first, see
        :meth:`_maybe_in_ceph`). :returns: whether there was one.

        :raises InvalidInput: a bad UUID.
        :raises RbdError: Ceph could not remove the disk (the directory is kept).
        """
        uuid = validate_uuid(instance_uuid)
        with self._instance_lock(uuid):
            directory = imagebackend.instance_dir(self.conf, uuid)
            if self._maybe_in_ceph(read_record(directory), directory):
                self.rbd.remove(uuid)
            deleted = imagebackend.delete_instance_disk(self.conf, uuid)
        if deleted:
            LOG.info("Deleted the disk of instance %s", uuid)
        return deleted

    def _maybe_in_ceph(self, record: DiskRecord | None, directory: str) -> bool:
        """Whether the instance's disk may be an rbd image, to remove before its directory.

        Its record says so; or, when the record is missing or unreadable while the directory
        has no local disk, this host makes rbd disks at all: the disk may then be in Ceph
        with its record lost, and removing an rbd image that does not exist is a no-op,
        while leaving one that does would leak it in Ceph with nothing left to name it.
        """
        if record is not None:
            return record["backend"] == "rbd"
        if not os.path.isdir(directory) or os.path.lexists(os.path.join(directory, DISK_NAME)):
            return False
        return "rbd" in imagebackend.backends_in_use(self.conf)

    def _create_locked(self, uuid: str, image_id: str, plan: imagebackend.DiskPlan,
                       base: str, size: int | None, fetched: bool) -> InstanceDiskResult:
        """Make the disk; the caller holds the image's lock and ``base`` exists."""
        base_format = self.cache.base_format(image_id, plan.disk_format, plan.base_format)
        plan = dataclasses.replace(plan, base_format=base_format)
        if base_format != "raw":
            # NOTE: the base passed this at download; checking again costs one header read
            # and a qemu-img info, and keeps a file that is not what its record says (or that
            # changed on disk since) from ever becoming a backing file.
            format_safety.inspect_image(base, base_format, self.conf, image_id=image_id)
        directory = imagebackend.instance_dir(self.conf, uuid)
        os.makedirs(directory, exist_ok=True)
        backend = imagebackend.get_backend(plan.backend, self.conf)
        disk_format = "qcow2" if backend.name == "qcow2" else "raw"
        write_record(directory, DiskRecord(image_id=image_id, backend=backend.name,
                                           format=disk_format, base=base,
                                           base_format=base_format))
        try:
            if backend.name == "rbd":
                self._import(uuid, plan, base, directory, size)
                disk = imagebackend.InstanceDisk("rbd", self.rbd.uri(uuid), "raw")
            else:
                disk = imagebackend.create_instance_disk(self.conf, plan, uuid, base, size)
        except BaseException:
            _discard(directory)
            raise
        self.cache.touch(image_id)
        return InstanceDiskResult(instance_uuid=uuid, image_id=image_id, backend=disk.backend,
                                  path=disk.path, format=disk.format, base=base,
                                  image_fetched=fetched)

    def _import(self, uuid: str, plan: imagebackend.DiskPlan, base: str, directory: str,
                size: int | None) -> None:
        """Import ``base`` into the instance's rbd disk, through a raw copy when it is not raw.

        Ceph stores raw bytes, so a base is imported as it is only when it is raw. A base
        cached in another format (qcow2, cached while this host's mapping kept qcow2 images as
        qcow2, before the operator mapped them to rbd) stays as it is: overlays made then
        still back onto it. Its raw copy is written in the instance's directory, read once by
        the import and removed after it, failed or not; a full disk fails the conversion with
        qemu-img's message and leaves nothing behind.
        """
        if plan.base_format == "raw":
            self.rbd.import_base(base, uuid, size)
            return
        staged = os.path.join(directory, "base.raw.part")
        try:
            qemu.convert(base, plan.base_format, staged, "raw",
                         timeout_s=plan.convert_timeout)
            self.rbd.import_base(staged, uuid, size)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(staged)

    def _clone(self, uuid: str, image_id: str, parent: RbdLocation,
               size: int | None) -> InstanceDiskResult:
        """The rbd disk as a clone of Glance's snapshot (we hold the instance's lock)."""
        directory = imagebackend.instance_dir(self.conf, uuid)
        os.makedirs(directory, exist_ok=True)
        write_record(directory, DiskRecord(image_id=image_id, backend="rbd", format="raw",
                                           base=parent.url, base_format="raw"))
        try:
            self.rbd.clone(parent, uuid, size)
        except BaseException:
            _discard(directory)
            raise
        return InstanceDiskResult(instance_uuid=uuid, image_id=image_id, backend="rbd",
                                  path=self.rbd.uri(uuid), format="raw", base=parent.url,
                                  image_fetched=False)

    def _forget_unmade_disk(self, uuid: str, directory: str) -> None:
        """Remove what a create left when its process died between writing ``disk.json``
        and making the disk (we hold the instance's lock).

        ``disk.json`` is written first, so that the ageing pass never sees a disk without
        its record; a compute killed (or a host losing power) after that but before the disk
        exists left a record that made every later create of this instance a ``Conflict``.
        Only a record whose disk never came into being is removed: no ``disk`` in the
        directory (a local disk is written as ``disk.part`` and renamed when complete, so a
        ``disk.part`` is no disk), and for the ``rbd`` backend no image of the instance in
        Ceph. An image there, even one an import left half written, is kept, as is a record
        that cannot be read (its backend is unknown): the instance's delete removes those.

        :raises RbdError: Ceph could not be asked whether the disk exists.
        """
        if (not os.path.lexists(os.path.join(directory, RECORD_NAME))
                or os.path.lexists(os.path.join(directory, DISK_NAME))):
            return
        record = read_record(directory)
        if record is None or (record["backend"] == "rbd" and self.rbd.exists(uuid)):
            return
        LOG.warning("Instance %s: removing the disk record its earlier create left when it "
                    "stopped before the %s disk existed", uuid, record["backend"])
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, f"{DISK_NAME}.part"))
        _discard(directory)

    def _instance_lock(self, uuid: str) -> contextlib.AbstractContextManager[Any]:
        return named_lock(self.cache.lock_path, f"instance-{uuid}")


def _discard(directory: str) -> None:
    """Undo a failed create: the record, then the directory if nothing else is in it."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, RECORD_NAME))
    with contextlib.suppress(OSError):
        os.rmdir(directory)
