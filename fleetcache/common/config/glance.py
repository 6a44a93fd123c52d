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
        help="Retries of a failed image service request, each on the next endpoint.",
    ),
    cfg.BoolOpt(
        "verify_glance_signatures",
        default=False,
        help="Verify ``img_signature*`` properties of images while downloading them.",
    ),
    cfg.IntOpt(
        "download_chunk_size",
        default=4 * 1024 * 1024,
        min=4096,
        help="""
Bytes read from the image service per chunk while downloading.

Nova's client uses 64 KiB; larger chunks cost fewer Python round trips per byte.
""",
    ),
    cfg.FloatOpt(
        "request_timeout",
        default=60.0,
        min=1,
        help="Seconds to wait for the image service to answer or to send the next bytes.",
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
