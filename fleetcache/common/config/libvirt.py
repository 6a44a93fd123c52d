"""Options of the ``[libvirt]`` group: disk backends and limits on the qemu-img commands.

Names, choices and defaults follow Nova's ``nova/conf/libvirt.py``; ``images_type_mapping`` is
the option of the Nova spec "Libvirt runtime image type" (never merged upstream), and Nova has
no ``images_convert_timeout`` / ``images_create_timeout`` (its conversions run unbounded).
"""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.common.disk_formats import IMAGES_TYPE_CHOICES

libvirt_group = cfg.OptGroup("libvirt", title="Libvirt-style disk backend options")

libvirt_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "virt_type",
        default="kvm",
        choices=("kvm", "lxc", "qemu", "parallels"),
        help="""
Hypervisor the instance disks are built for.

Only ``parallels`` can use ``ploop`` disks.

Related options:
* images_type, images_type_mapping: a ``ploop`` backend needs ``virt_type = parallels``.
""",
    ),
    cfg.StrOpt(
        "images_type",
        default="default",
        choices=IMAGES_TYPE_CHOICES,
        help="""
Disk backend of instances whose image format has no entry in ``images_type_mapping``.

Possible values:
* raw, flat: a sparse raw copy of the cached base image.
* qcow2: a qcow2 overlay whose backing file is the cached base image.
* lvm: a logical volume in ``images_volume_group``.
* rbd: a Ceph RBD image in ``images_rbd_pool`` (the rados/rbd Python bindings): a
  copy-on-write clone of Glance's snapshot for a raw image stored in the same cluster (nothing
  is downloaded), else an import of the cached base, converted to raw first.
* ploop: a Parallels ploop disk (needs ``virt_type = parallels`` and the ploop tools).
* default: qcow2 when ``[DEFAULT] use_cow_images`` is true, else flat.

Related options:
* images_type_mapping, [DEFAULT] use_cow_images, [DEFAULT] force_raw_images
""",
    ),
    cfg.ListOpt(
        "images_type_mapping",
        default=[],
        help="""
Disk backend per source image format, as ``<disk_format>:<backend>`` entries.

An image whose Glance ``disk_format`` has an entry uses that backend, and is used without
conversion when the backend can hold that format (``qcow2:qcow2``, ``raw:lvm``). Formats
without an entry use ``images_type``. Each source format may appear once; ``lvm``, ``rbd``,
``flat`` and ``default`` are backends, not source formats.

Possible values:
* A list such as ``raw:lvm, ploop:ploop`` or ``raw:raw, qcow2:qcow2``; empty (the default)
  means every image uses ``images_type``.

Related options:
* images_type
""",
    ),
    cfg.StrOpt(
        "images_volume_group",
        help="""
LVM volume group holding instance disks; required when a backend is ``lvm``.

Related options:
* images_type, images_type_mapping
""",
    ),
    cfg.IntOpt(
        "images_cpu_time_limit",
        default=30,
        min=1,
        help="""
CPU time limit, in seconds, of ``qemu-img info`` when it inspects an untrusted image.

Related options:
* images_address_space_limit
""",
    ),
    cfg.IntOpt(
        "images_address_space_limit",
        default=2,
        min=1,
        help="""
Address space limit, in GiB, of ``qemu-img info`` when it inspects an untrusted image.

Related options:
* images_cpu_time_limit
""",
    ),
    cfg.IntOpt(
        "images_convert_timeout",
        default=600,
        min=1,
        help="""
Wall-clock time limit, in seconds, of ``qemu-img convert`` when it turns a downloaded image
into the cached raw base (or a non-raw base into a raw/flat instance disk).

A conversion runs while it holds the image's lock and one RPC worker thread of the compute,
and one blocked on a hung disk or NFS server uses no CPU, so ``images_cpu_time_limit`` would
never stop it. At the limit qemu-img (its whole process group) is killed, its partial output is
removed, nothing is cached, and the image's result is ``error`` with a reason naming this
option. A conversion writes the image's data at the speed of the disk: the default, 600,
allows about 60 GiB at 100 MiB/s; raise it for larger images or slower storage.

Related options:
* images_create_timeout, [DEFAULT] force_raw_images, images_type, images_type_mapping
""",
    ),
    cfg.IntOpt(
        "images_create_timeout",
        default=60,
        min=1,
        help="""
Wall-clock time limit, in seconds, of ``qemu-img create`` when it makes a qcow2 instance disk
on top of a cached base.

Creating an overlay writes only a few KiB of metadata and reads the base's header: it takes
milliseconds, so a minute means the storage is hung. It runs while it holds the image's lock
and an RPC worker thread; at the limit qemu-img is killed, the partial disk is removed and the
request fails with a reason naming this option.

Related options:
* images_convert_timeout
""",
    ),
    cfg.StrOpt(
        "rbd_user",
        default="",
        help="""
The Ceph user of the rbd disk backend; also the user of direct image downloads when
``[glance] rbd_user`` is empty (as Nova).
""",
    ),
    cfg.StrOpt(
        "images_rbd_pool",
        default="rbd",
        help="""
The Ceph pool of the rbd disk backend's instance disks (``<instance uuid>_disk``).
""",
    ),
    cfg.IntOpt(
        "rbd_connect_timeout",
        default=5,
        min=1,
        help="""
Seconds the rbd disk backend waits to reach the cluster's monitors and for each monitor
request; each OSD request may take six times as long.
""",
    ),
    cfg.StrOpt(
        "images_rbd_ceph_conf",
        default="",
        help="""
The ``ceph.conf`` of the rbd disk backend's cluster; also the cluster of direct image downloads
when ``[glance] rbd_ceph_conf`` is empty (as Nova).
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(libvirt_group)
    conf.register_opts(libvirt_opts, group=libvirt_group)


def list_opts() -> list[tuple[str | cfg.OptGroup | None, list[cfg.Opt]]]:
    return [(libvirt_group, libvirt_opts)]
