"""Options of the ``[conductor]`` group."""

from __future__ import annotations

from oslo_config import cfg

conductor_group = cfg.OptGroup("conductor", title="Conductor options")

conductor_opts: list[cfg.Opt] = [
    cfg.IntOpt(
        "cell_refresh_interval",
        default=60,
        min=5,
        help="""
Seconds between two looks at the cells table for cells the conductor does not serve yet.

The conductor listens on every cell's transport; a cell created while it runs is picked up
within this interval.
""",
    ),
    cfg.IntOpt(
        "max_concurrent_jobs",
        default=4,
        min=1,
        help="""
Pre-cache jobs one conductor coordinates at once.

Each running job holds one coordinator thread while it fans out to its hosts (the hosts
themselves are called from the pool of ``[image_cache] precache_concurrency`` workers,
shared by all jobs). A job accepted beyond this limit stays ``queued`` until a coordinator
is free.
""",
    ),
    cfg.IntOpt(
        "job_lease_time",
        default=30,
        min=3,
        help="""
Seconds a conductor holds a pre-cache job without renewing its lease.

The conductor running a job renews the leases of all its jobs every third of this time. When
it dies (``kill -9``, host lost), another conductor takes the job over once the lease has
expired, within ``job_lease_time + job_takeover_interval`` seconds, and calls again only the
hosts without a stored result. A conductor restarting on the same host takes the jobs of its
previous process over at start-up, whatever their lease.

Shorter: faster takeover, one more ``UPDATE`` per conductor every third of it. Conductors'
clocks must agree to well within this time.

Related options:
* job_takeover_interval
""",
    ),
    cfg.IntOpt(
        "job_takeover_interval",
        default=10,
        min=1,
        help="""
Seconds between two looks for pre-cache jobs whose conductor's lease expired.

Related options:
* job_lease_time
""",
    ),
    cfg.FloatOpt(
        "job_window_interval",
        default=5.0,
        min=0.5,
        help="""
Seconds between two looks for this conductor's scheduled pre-cache jobs whose window opened
(a request's ``fleetcache:not_before`` or daily ``fleetcache:window``), or whose deadline
passed while they waited.

A job starts at most this long after its window opens. Each look is one indexed query.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(conductor_group)
    conf.register_opts(conductor_opts, group=conductor_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(conductor_group, conductor_opts)]
