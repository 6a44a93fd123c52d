"""Options of the ``[glance]`` group: how computes and the conductor reach the image service."""

from __future__ import annotations

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg, types

glance_group = cfg.OptGroup("glance", title="Image service (Glance) options")

glance_opts: list[cfg.Opt] = [
    cfg.ListOpt(
        "api_servers",
        default=[],
        item_type=types.URI(schemes=["http", "https"]),
        help="""
Glance API endpoints, e.g. ``http://127.0.0.1:9292``, tried in turn.

When empty, the endpoint comes from the Keystone catalog through the ``[glance]`` auth options.
""",
    ),
    cfg.IntOpt(
        "num_retries",
        default=3,
        min=0,
        help="""
Retries of a failed image service request, each on the next endpoint, after a pause that
doubles from 1 s (at most 10 s).

For a download the bound is on retries *without progress*: an attempt that received new bytes
before it failed resumes from them (``Range``) and gets ``num_retries`` fresh retries, so a long
download over a link that keeps breaking goes on while it moves forward, and one that stalls
stops once ``num_retries`` retries in a row brought nothing. ``0`` disables retries, also after
progress. Metadata requests make at most ``num_retries + 1`` attempts.
""",
    ),
    cfg.BoolOpt(
        "verify_glance_signatures",
        default=False,
        help="""
Verify images' signatures while downloading them (cursive, as Nova).

An image that carries ``img_signature``, ``img_signature_hash_method``,
``img_signature_key_type`` and ``img_signature_certificate_uuid`` is verified against the
certificate (from the key manager, Barbican through castellan) while its bytes stream; a bad
signature, or only some of the four properties, fails that image and leaves nothing in the
cache. Images with none of them are not verified.
""",
    ),
    cfg.IntOpt(
        "download_chunk_size",
        default=4 * 1024 * 1024,
        min=4096,
        help="""
The largest chunk read at once while downloading, from the image service or from a peer.

Nova's client uses 64 KiB; larger chunks cost fewer Python round trips per byte. Reads are
smaller while bytes arrive slowly (each about 1/32 s of them, at least 64 KiB or this size
if smaller), so that a slow link's bytes reach the cache and any peers served from it
without waiting for a whole chunk. A download under a call's rate reads less still.
""",
    ),
    cfg.FloatOpt(
        "request_timeout",
        default=60.0,
        min=1,
        help="Seconds to wait for the image service to answer or to send the next bytes.",
    ),
    cfg.ListOpt(
        "allowed_direct_url_schemes",
        default=[],
        item_type=types.String(choices=["rbd"]),
        help="""
Schemes of an image's ``direct_url`` (or ``locations``) this compute downloads from directly
instead of through the image service's HTTP API. Only ``rbd`` is known: an image stored in a
Ceph cluster this compute can reach (``rbd://<fsid>/<pool>/<image>/<snapshot>``, with the fsid
of ``[glance] rbd_ceph_conf``'s cluster) is exported from Ceph with ``rbd export``. Any
failure of the direct path falls back to HTTP, and the job result records why.

Glance shows ``direct_url`` only with ``show_image_direct_url = true``. Not deprecated (the
"Download images directly via RBD" spec of Nova Victoria undeprecated it; Nova itself later
replaced it by ``enable_rbd_download``, accepted here too).

Related options:
* enable_rbd_download, rbd_user, rbd_ceph_conf, rbd_keyring, rbd_connect_timeout
""",
    ),
    cfg.BoolOpt(
        "enable_rbd_download",
        default=False,
        help="""
Nova's name for ``allowed_direct_url_schemes = rbd``: true adds ``rbd`` to the allowed schemes.
""",
    ),
    cfg.StrOpt(
        "rbd_user",
        default="",
        help="""
The Ceph user (without ``client.``) that exports Glance's images; it needs only read access to
Glance's pool (``osd 'profile rbd-read-only pool=images'``). Empty: ``[libvirt] rbd_user``.
""",
    ),
    cfg.StrOpt(
        "rbd_ceph_conf",
        default="",
        help="""
The ``ceph.conf`` of the cluster to export from; its ``fsid`` must be the one of the image's
``rbd://`` URL, else the image is downloaded over HTTP. Empty: ``[libvirt]
images_rbd_ceph_conf``, else ``/etc/ceph/ceph.conf``.
""",
    ),
    cfg.StrOpt(
        "rbd_keyring",
        default="",
        help="""
The keyring of ``rbd_user``. Empty: ``ceph.client.<rbd_user>.keyring`` beside
``rbd_ceph_conf``. It is passed to ``rbd`` explicitly, so nothing depends on the environment
of the process that runs it.
""",
    ),
    cfg.IntOpt(
        "rbd_connect_timeout",
        default=5,
        min=1,
        help="""
Seconds ``rbd export`` may take to reach the cluster's monitors and for each monitor request
(Ceph's ``client_mount_timeout`` and ``rados_mon_op_timeout``; Ceph's own default waits 300 s
for an unreachable cluster).
""",
    ),
    cfg.IntOpt(
        "rbd_osd_op_timeout",
        default=30,
        min=1,
        help="""
Seconds one read of ``rbd export`` may wait for an OSD (Ceph's ``rados_osd_op_timeout``; by
default Ceph waits for ever for an OSD that is down).
""",
    ),
    cfg.IntOpt(
        "rbd_export_timeout",
        default=3600,
        min=1,
        help="""
Seconds one ``rbd export`` may take in all; then it is killed and the image is downloaded over
HTTP instead.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(glance_group)
    conf.register_opts(glance_opts, group=glance_group)
    ks_loading.register_session_conf_options(conf, glance_group.name)
    ks_loading.register_auth_conf_options(conf, glance_group.name)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    auth = ks_loading.get_auth_common_conf_options()
    session = ks_loading.get_session_conf_options()
    return [(glance_group, glance_opts + session + auth)]
