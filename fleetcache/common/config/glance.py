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
