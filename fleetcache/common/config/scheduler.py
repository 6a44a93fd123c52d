"""Options of the ``[scheduler]`` group: the request filters that shape the one Placement query
of a scheduling request (``fleetcache.conductor.scheduler.request_filters``). Names are Nova's
where Nova has the option."""

from __future__ import annotations

from oslo_config import cfg

scheduler_group = cfg.OptGroup(
    "scheduler",
    title="Scheduler options",
    help="What the conductor's scheduler asks Placement for before any host filter runs.",
)

scheduler_opts: list[cfg.Opt] = [
    cfg.BoolOpt(
        "filter_hosts_by_image_type_support",
        default=True,
        deprecated_opts=[cfg.DeprecatedOpt("query_placement_for_image_type_support",
                                           group="scheduler")],
        help="""
Ask Placement only for hosts whose resource provider has the ``COMPUTE_IMAGE_TYPE_<FMT>`` trait
of the image's ``disk_format`` (a ``required`` trait of the allocation candidates query), so an
instance never lands on a host that cannot use its image. The pre-cache job uses the same rule
to mark such a host ``unsupported`` without asking it.

Nova's ``query_placement_for_image_type_support`` (accepted here as a deprecated name) defaults
to False because a Nova compute from before Stein reports no image-type traits and would drop
out. fleetcache defaults to True: its computes report their image types from the first release
that put them in Placement, and a compute whose report has not reached Placement is not
schedulable at all, so no compute can be lost by the trait alone. ``fleetcache-manage status``
warns while an up compute has no image-type traits in Placement. An image whose
``disk_format`` has no os-traits trait is not filtered (logged as an error), as in Nova.
""",
    ),
    cfg.BoolOpt(
        "enable_isolated_aggregate_filtering",
        default=False,
        help="""
Nova's isolated aggregates: an aggregate with metadata ``trait:<TRAIT>=required`` takes only
requests whose flavor or image requires every such trait of the aggregate; other requests are
kept out of it with a forbidden aggregate (``member_of=!in:<uuids>``) in the Placement query.
Off by default, as in Nova: it reads every aggregate's metadata per request.
""",
    ),
    cfg.IntOpt(
        "max_placement_results",
        default=1000,
        min=1,
        help="""
At most this many allocation candidates are asked of Placement (the ``limit`` of ``GET
/allocation_candidates``), as Nova's option. Isolation and image type are pushed down into the
query, so the candidates that come back already pass them; a lower limit makes a request
cheaper for the conductor (every candidate is host-filtered and weighed) but leaves fewer
hosts to try when claims conflict under load.
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(scheduler_group)
    conf.register_opts(scheduler_opts, group=scheduler_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(scheduler_group, scheduler_opts)]
