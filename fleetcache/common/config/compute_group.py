"""Options of the ``[compute]`` group (names and defaults as Nova's ``nova/conf/compute.py``)."""

from __future__ import annotations

from oslo_config import cfg

compute_group = cfg.OptGroup("compute", title="Compute host options")

compute_group_opts: list[cfg.Opt] = [
    cfg.ListOpt(
        "vmdk_allowed_types",
        default=["streamOptimized", "monolithicSparse"],
        help="""
VMDK create-types an image may have to be accepted.

Other create-types (``monolithicFlat`` and friends) name extent files on the host and are
refused (CVE-2022-47951). An empty list refuses every VMDK image.

Possible values:
* A list of create-type names (compared case-insensitively); only ``streamOptimized`` and
  ``monolithicSparse`` can pass the format inspector's own safety check.
""",
    ),
    cfg.ListOpt(
        "image_type_exclude_list",
        default=[],
        help="""
Image formats this compute must not report as supported, even when it could handle them.

Possible values:
* A list of Glance ``disk_format`` names, for example ``qcow2``.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(compute_group)
    conf.register_opts(compute_group_opts, group=compute_group)


def list_opts() -> list[tuple[str | cfg.OptGroup | None, list[cfg.Opt]]]:
    return [(compute_group, compute_group_opts)]
