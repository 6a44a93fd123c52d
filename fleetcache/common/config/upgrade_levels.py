"""Options of the ``[upgrade_levels]`` group: RPC version caps for rolling upgrades (as Nova's)."""

from __future__ import annotations

from oslo_config import cfg

upgrade_levels_group = cfg.OptGroup(
    "upgrade_levels",
    title="RPC API version caps",
    help="""
Caps on the RPC API versions this service sends, so that new services can run beside old
ones during a rolling upgrade. Unset means the newest version the code knows.
""",
)

upgrade_levels_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "compute",
        help="""
Compute RPC API version cap (``1.0``, ``1.1``...).

Set it to the version of the oldest compute agent while some still run older code; calls that
need a newer version then fail with a clear error instead of reaching an agent that cannot
serve them.

Possible values:
* unset: no cap (the newest version).
* a version such as ``1.0``.
""",
    ),
    cfg.StrOpt(
        "conductor",
        help="""
Conductor RPC API version cap (``1.0``, ``1.1``...).

Set it on compute agents upgraded before the conductor: reports the old conductor cannot take
are then not sent.

Possible values:
* unset: no cap (the newest version).
* a version such as ``1.0``.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(upgrade_levels_group)
    conf.register_opts(upgrade_levels_opts, group=upgrade_levels_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(upgrade_levels_group, upgrade_levels_opts)]
