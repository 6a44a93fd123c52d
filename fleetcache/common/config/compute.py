"""Options of the compute agent: its virt driver and the fake driver's knobs."""

from __future__ import annotations

from oslo_config import cfg

compute_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "compute_driver",
        default="disk",
        help="""
Virt driver of the compute agent (entry point group ``fleetcache.compute.drivers``).

Possible values:
* disk: caches images in ``instances_path`` and builds instance disks from them.
* fake: does no real work; for tests and scale benchmarks (see ``[fake_driver]``).
""",
    ),
    cfg.BoolOpt(
        "use_cow_images",
        default=True,
        help="""
Whether ``[libvirt] images_type = default`` means qcow2 overlays (true) or flat copies (false).

Related options:
* [libvirt] images_type
""",
    ),
    cfg.BoolOpt(
        "force_raw_images",
        default=True,
        help="""
Convert cached base images to raw.

When true, an image in another format is converted to raw once, when it enters the image cache,
unless ``[libvirt] images_type_mapping`` maps its format to a backend that holds that format
as it is (``qcow2:qcow2``). When false, images are converted only for backends that need raw.

Related options:
* [libvirt] images_type, [libvirt] images_type_mapping
""",
    ),
]

fake_driver_group = cfg.OptGroup("fake_driver", title="Fake virt driver options")

fake_driver_opts: list[cfg.Opt] = [
    cfg.FloatOpt(
        "cache_delay",
        default=0.0,
        min=0.0,
        help="Seconds ``cache_image`` sleeps, to stand in for a download.",
    ),
    cfg.ListOpt(
        "fail_images",
        default=[],
        help="Image ids whose ``cache_image`` raises an error.",
    ),
    cfg.BoolOpt(
        "unsupported",
        default=False,
        help="Make ``cache_image`` raise NotImplementedError, like a driver without a cache.",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(compute_opts)
    conf.register_group(fake_driver_group)
    conf.register_opts(fake_driver_opts, group=fake_driver_group)


def list_opts() -> list[tuple[str | cfg.OptGroup | None, list[cfg.Opt]]]:
    return [(None, compute_opts), (fake_driver_group, fake_driver_opts)]
