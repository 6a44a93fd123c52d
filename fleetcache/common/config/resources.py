"""``[DEFAULT]`` options of a compute's resource inventory in Placement (names, defaults and
meaning as Nova's ``nova/conf/compute.py``).

The compute measures its host (CPUs, memory, the disk under ``instances_path``) and applies
these before it reports; the conductor writes the result as the host's resource provider
inventory (``VCPU``, ``MEMORY_MB``, ``DISK_GB``).
"""

from __future__ import annotations

from oslo_config import cfg

#: The help of the three ``*_allocation_ratio`` options, which differ only in their class.
_RATIO_HELP = """
{what} allocation ratio
(the ``{rc}`` inventory's ``allocation_ratio`` in Placement).

When unset or 0.0, ``initial_{kind}_allocation_ratio`` is used.
0.0 means unset as in Nova, where it was the default before Stein:
a nova.conf fragment that still says ``{kind}_allocation_ratio = 0.0``
keeps the initial ratio rather than giving the host no ``{rc}``.

Possible values:

* unset or 0.0: ``initial_{kind}_allocation_ratio``
* any positive number: that ratio

Related options:

* ``initial_{kind}_allocation_ratio``
"""

resource_opts: list[cfg.Opt] = [
    cfg.FloatOpt(
        "cpu_allocation_ratio",
        min=0.0,
        help=_RATIO_HELP.format(what="Virtual CPU to physical CPU", rc="VCPU", kind="cpu"),
    ),
    cfg.FloatOpt(
        "ram_allocation_ratio",
        min=0.0,
        help=_RATIO_HELP.format(what="Virtual RAM to physical RAM", rc="MEMORY_MB",
                                kind="ram"),
    ),
    cfg.FloatOpt(
        "disk_allocation_ratio",
        min=0.0,
        help=_RATIO_HELP.format(what="Virtual disk to physical disk", rc="DISK_GB",
                                kind="disk"),
    ),
    cfg.FloatOpt("initial_cpu_allocation_ratio", default=4.0, min=0.0,
                 help="``VCPU`` allocation ratio when ``cpu_allocation_ratio`` is unset "
                      "or 0.0."),
    cfg.FloatOpt("initial_ram_allocation_ratio", default=1.0, min=0.0,
                 help="``MEMORY_MB`` allocation ratio when ``ram_allocation_ratio`` is unset "
                      "or 0.0."),
    cfg.FloatOpt("initial_disk_allocation_ratio", default=1.0, min=0.0,
                 help="``DISK_GB`` allocation ratio when ``disk_allocation_ratio`` is unset "
                      "or 0.0."),
    cfg.IntOpt(
        "reserved_host_cpus",
        default=0,
        min=0,
        help="Host CPUs kept for the host itself (the ``VCPU`` inventory's ``reserved``).",
    ),
    cfg.IntOpt(
        "reserved_host_memory_mb",
        default=512,
        min=0,
        help="Memory (MiB) kept for the host itself (``MEMORY_MB`` ``reserved``).",
    ),
    cfg.IntOpt(
        "reserved_host_disk_mb",
        default=0,
        min=0,
        help="""
Disk (MiB) under ``instances_path`` kept for the host itself (``DISK_GB`` ``reserved``,
rounded up to whole GiB as Nova does).
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_opts(resource_opts)


def list_opts() -> list[tuple[str | cfg.OptGroup | None, list[cfg.Opt]]]:
    return [(None, resource_opts)]
