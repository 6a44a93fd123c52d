"""How a compute reaches Ceph for direct downloads: :class:`RbdSettings`, resolved from
``[glance]`` with Nova's ``[libvirt]`` fallbacks for empty values.

Two processes resolve them, each from its own configuration and through this one function:
the compute (:mod:`fleetcache.compute.imagecache.direct` reads the cluster's fsid from
``ceph_conf`` to route an image) and its privsep daemon (:mod:`fleetcache.privsep.rbd` runs
``rbd export`` as ``user`` with ``keyring`` under the timeouts). The daemon never takes them
from the compute: it is started on the compute's configuration files and reads them there.
"""

from __future__ import annotations

import dataclasses
import os

from oslo_config import cfg

#: Ceph's own default configuration file, the last fallback of ``ceph_conf``.
DEFAULT_CEPH_CONF = "/etc/ceph/ceph.conf"


@dataclasses.dataclass(frozen=True)
class RbdSettings:
    """The Ceph client settings of direct downloads."""

    user: str
    ceph_conf: str
    keyring: str
    connect_timeout: int
    osd_op_timeout: int
    export_timeout: int

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> RbdSettings | None:
        """The settings, or None when ``rbd`` is not an allowed direct URL scheme.

        :param conf: a configuration with ``[glance]`` and ``[libvirt]`` registered.
        """
        glance = conf.glance
        if "rbd" not in glance.allowed_direct_url_schemes and not glance.enable_rbd_download:
            return None
        user = glance.rbd_user or conf.libvirt.rbd_user or "admin"
        ceph_conf = os.path.abspath(
            glance.rbd_ceph_conf or conf.libvirt.images_rbd_ceph_conf or DEFAULT_CEPH_CONF)
        keyring = os.path.abspath(glance.rbd_keyring or os.path.join(
            os.path.dirname(ceph_conf), f"ceph.client.{user}.keyring"))
        return cls(user=user, ceph_conf=ceph_conf, keyring=keyring,
                   connect_timeout=glance.rbd_connect_timeout,
                   osd_op_timeout=glance.rbd_osd_op_timeout,
                   export_timeout=glance.rbd_export_timeout)
