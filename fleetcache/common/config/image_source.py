"""Options of the ``[image_source]`` group: where images come from."""

from __future__ import annotations

from oslo_config import cfg

image_source_group = cfg.OptGroup("image_source", title="Image source options")

image_source_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "backend",
        default="glance",
        help="""
Name of the image source plugin (entry point group ``fleetcache.image.sources``).

Possible values:
* glance: the Glance v2 API (see ``[glance]``).
* local: a directory of image files with JSON metadata, for the embedded demo and labs.
""",
    ),
    cfg.StrOpt(
        "local_directory",
        default="$state_path/images",
        help="Directory the ``local`` image source serves images from.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(image_source_group)
    conf.register_opts(image_source_opts, group=image_source_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(image_source_group, image_source_opts)]
