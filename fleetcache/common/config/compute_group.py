"""Options of the ``[compute]`` group (names and defaults as Nova's ``nova/conf/compute.py``)."""

from __future__ import annotations

from oslo_config import cfg, types

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
    cfg.ListOpt(
        "custom_traits",
        default=[],
        item_type=types.String(regex=r"^CUSTOM_[A-Z0-9_]{1,248}$"),
        help="""
Operator traits this compute's resource provider carries in Placement besides those derived
from its capabilities. Not Nova's (Nova takes them from a provider config file).

Possible values:
* A list of ``CUSTOM_*`` trait names (upper case letters, digits and ``_``), for example
  ``CUSTOM_TROVE``; the conductor creates a trait in Placement before it first uses it.
""",
    ),
    cfg.IntOpt(
        "max_concurrent_long_calls",
        default=24,
        min=1,
        help="""
RPC calls that may run for minutes (``cache_images``, ``create_instance_disk``: a download,
then a conversion) this compute serves at once. Not Nova's.

Each such call holds one of the RPC server's ``[DEFAULT] executor_thread_pool_size`` worker
threads for its whole length, and oslo.messaging sends the call-monitor heartbeats that keep
the caller waiting only for a call a worker has picked up: a call queued behind busy workers
gets none, and its caller gives up after ``rpc_response_timeout`` although this compute is
alive. So this limit stays below ``executor_thread_pool_size``, which keeps workers free for
short calls and for answering (a value that is not below it is lowered to
``executor_thread_pool_size - 1``, with a warning); a long call beyond it is answered at once
with an error naming this option (a pre-cache job records it as the host's ``error`` reason),
never left to time out.

Possible values:
* An integer from 1 to ``executor_thread_pool_size - 1``.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(compute_group)
    conf.register_opts(compute_group_opts, group=compute_group)


def list_opts() -> list[tuple[str | cfg.OptGroup | None, list[cfg.Opt]]]:
    return [(compute_group, compute_group_opts)]
