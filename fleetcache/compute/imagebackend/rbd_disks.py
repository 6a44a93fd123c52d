"""Instance disks of the rbd backend: images ``<instance uuid>_disk`` in ``[libvirt]
images_rbd_pool``, through Debian's ``rados``/``rbd`` Python bindings.

A raw image that Glance stores in the same cluster (an ``rbd://`` location whose fsid is the
one of ``[libvirt] images_rbd_ceph_conf``) becomes a copy-on-write clone of Glance's protected
snapshot: nothing is downloaded, and the disk shares the image's data until the guest writes.
Any other image is imported from the cached base (raw: the backend holds no other format, so
the cache converts it first). The cluster is reached as ``[libvirt] rbd_user`` with Ceph's
client timeouts bounded by ``[libvirt] rbd_connect_timeout``, so an unreachable cluster fails
within seconds instead of Ceph's default 300.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging

from fleetcache.common import exception
from fleetcache.common.rbd_settings import DEFAULT_CEPH_CONF
from fleetcache.image.rbd_location import (
    InvalidRbdUrl,
    RbdLocation,
    parse_rbd_url,
    rbd_urls,
    read_fsid,
)
from fleetcache.image.source import ImageMeta

LOG = logging.getLogger(__name__)

#: Bytes read from the base and written to Ceph per request of an import.
IMPORT_CHUNK = 8 * 1024 * 1024


def disk_name(instance_uuid: str) -> str:
    """The instance's disk in the pool (Nova's name)."""
    return f"{instance_uuid}_disk"


class RbdDisks:
    """Creates and removes instance disks in one Ceph pool."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        opts = conf.libvirt
        self.pool: str = opts.images_rbd_pool
        self.user: str = opts.rbd_user or "admin"
        self.ceph_conf = os.path.abspath(opts.images_rbd_ceph_conf or DEFAULT_CEPH_CONF)
        self.timeout: int = opts.rbd_connect_timeout

    def uri(self, instance_uuid: str) -> str:
        return f"rbd:{self.pool}/{disk_name(instance_uuid)}"

    def cloneable(self, meta: ImageMeta, content_format: str) -> RbdLocation | None:
        """Glance's snapshot of ``meta`` when a clone can be its disk: the image is raw and
        stored in this cluster. Never raises (a reason not to clone is logged)."""
        if content_format != "raw":
            return None
        urls = list(rbd_urls(meta))
        if not urls:
            return None
        try:
            local = read_fsid(self.ceph_conf)
        except (OSError, ValueError) as exc:
            LOG.warning("Image %s: not cloned, cannot read the fsid of %s: %s", meta.id,
                        self.ceph_conf, exc)
            return None
        for url in urls:
            try:
                location = parse_rbd_url(url)
            except InvalidRbdUrl as exc:
                LOG.warning("Image %s: not cloned from %r: %s", meta.id, url, exc)
                continue
            if location.fsid == local:
                return location
        LOG.info("Image %s is in no pool of cluster %s; importing its cached base", meta.id,
                 local)
        return None

    def clone(self, parent: RbdLocation, instance_uuid: str, size: int | None) -> int:
        """Clone ``parent`` into the instance's disk, grown to ``size`` bytes if given.

        :returns: the disk's size.
        :raises InvalidInput: ``size`` is below the image's size (nothing is created).
        :raises RbdError: Ceph refused or could not be reached (nothing is left).
        """
        import rbd

        name = disk_name(instance_uuid)
        with self._cluster("clone") as cluster, \
                cluster.open_ioctx(parent.pool) as parent_ioctx, \
                cluster.open_ioctx(self.pool) as ioctx:
            with rbd.Image(parent_ioctx, parent.image, snapshot=parent.snapshot,
                           read_only=True) as image:
                virtual = int(image.size())
            if size is not None and size < virtual:
                raise exception.InvalidInput(
                    reason=f"disk size {size} is smaller than the image's size {virtual}")
            rbd.RBD().clone(parent_ioctx, parent.image, parent.snapshot, ioctx, name,
                            features=rbd.RBD_FEATURE_LAYERING)
            try:
                if size is not None and size > virtual:
                    with rbd.Image(ioctx, name) as disk:
                        disk.resize(size)
            except BaseException:
                rbd.RBD().remove(ioctx, name)
                raise
        LOG.info("Cloned %s into %s", parent.url, self.uri(instance_uuid))
        return size or virtual

    def import_base(self, base: str, instance_uuid: str, size: int | None) -> int:
        """Copy the raw cached ``base`` into the instance's disk (zero chunks are skipped, so
        the disk stays thin), grown to ``size`` bytes if given.

        :returns: the disk's size.
        :raises InvalidInput: ``size`` is below the base's size.
        :raises RbdError: Ceph refused or could not be reached (nothing is left).
        """
        import rbd

        virtual = os.path.getsize(base)
        if size is not None and size < virtual:
            raise exception.InvalidInput(
                reason=f"disk size {size} is smaller than the image's size {virtual}")
        total = size or virtual
        name = disk_name(instance_uuid)
        with self._cluster("import") as cluster, cluster.open_ioctx(self.pool) as ioctx:
            rbd.RBD().create(ioctx, name, total, old_format=False,
                             features=rbd.RBD_FEATURE_LAYERING)
            try:
                with rbd.Image(ioctx, name) as disk, open(base, "rb") as f:
                    offset = 0
                    while chunk := f.read(IMPORT_CHUNK):
                        if chunk.count(0) != len(chunk):
                            disk.write(chunk, offset)
                        offset += len(chunk)
                    disk.flush()
            except BaseException:
                rbd.RBD().remove(ioctx, name)
                raise
        LOG.info("Imported %s into %s", base, self.uri(instance_uuid))
        return total

    def exists(self, instance_uuid: str) -> bool:
        """Whether the instance's disk is in the pool, complete or not (an import writes
        under the disk's own name).

        :raises RbdError: Ceph refused or could not be reached.
        """
        import rbd

        with self._cluster("lookup") as cluster, cluster.open_ioctx(self.pool) as ioctx:
            try:
                with rbd.Image(ioctx, disk_name(instance_uuid), read_only=True):
                    return True
            except rbd.ImageNotFound:
                return False

    def remove(self, instance_uuid: str) -> bool:
        """Remove the instance's disk. :returns: whether there was one."""
        import rbd

        with self._cluster("remove") as cluster, cluster.open_ioctx(self.pool) as ioctx:
            try:
                rbd.RBD().remove(ioctx, disk_name(instance_uuid))
            except rbd.ImageNotFound:
                return False
        LOG.info("Removed %s", self.uri(instance_uuid))
        return True

    @contextlib.contextmanager
    def _cluster(self, action: str) -> Iterator[Any]:
        """A connected cluster handle; binding errors become :class:`RbdError`."""
        import rados
        import rbd

        seconds = str(self.timeout)
        cluster = rados.Rados(conffile=self.ceph_conf, rados_id=self.user, conf={
            "client_mount_timeout": seconds, "rados_mon_op_timeout": seconds,
            "rados_osd_op_timeout": str(self.timeout * 6)})
        try:
            cluster.connect(timeout=self.timeout)
            yield cluster
        except (rados.Error, rbd.Error) as exc:
            raise exception.RbdError(
                action=action, reason=f"{type(exc).__name__}: {exc} (pool {self.pool}, "
                f"user {self.user}, {self.ceph_conf})") from exc
        finally:
            cluster.shutdown()
