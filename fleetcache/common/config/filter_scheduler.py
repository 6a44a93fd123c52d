"""Options of the ``[filter_scheduler]`` group: which host filters and weighers the conductor's
scheduler runs, and their settings. Names and semantics are Nova's where Nova has the option."""

from __future__ import annotations

from oslo_config import cfg

filter_scheduler_group = cfg.OptGroup(
    "filter_scheduler",
    title="Host filters and weighers of the scheduler",
)

ALL_FILTERS = "fleetcache.conductor.scheduler.filters.all_filters"
ALL_WEIGHERS = "fleetcache.conductor.scheduler.weighers.all_weighers"

filter_scheduler_opts: list[cfg.Opt] = [
    cfg.MultiStrOpt(
        "available_filters",
        default=[ALL_FILTERS],
        help=f"""
Host filters the scheduler may use: each value is the dotted path of a filter class, or of a
function returning filter classes. ``{ALL_FILTERS}`` returns every filter installed under the
``fleetcache.scheduler.filters`` entry point namespace (fleetcache's own). Repeat the option to
add a class of your own; ``enabled_filters`` then picks by class name.
""",
    ),
    cfg.ListOpt(
        "enabled_filters",
        default=["ComputeFilter", "AvailabilityZoneFilter", "AggregateImageStrictIsolation"],
        help="""
Host filters run on each request, in this order, by class name (a class of
``available_filters``). An unknown name stops the conductor at start-up with the list of known
ones. Each filter logs its decision per host at debug level and each request logs one line with
the hosts in and out of every filter. AggregateImageStrictIsolation is on by default because it
does nothing until an aggregate has ``image_isolation_property`` metadata;
AggregateImagePropertiesIsolation and AggregateInstanceExtraSpecsFilter are off, as in Nova.
""",
    ),
    cfg.ListOpt(
        "weight_classes",
        default=[ALL_WEIGHERS],
        help="""
Weighers that order the hosts that passed the filters: dotted paths of weigher classes, or of
a function returning them (``all_weighers``: the cached-image, RAM and disk weighers).
""",
    ),
    cfg.FloatOpt(
        "ram_weight_multiplier",
        default=1.0,
        help="""
Multiplier of the RAM weigher (free MEMORY_MB from Placement's provider summary, normalised to
0..1 over the candidates as Nova does). Positive spreads instances, negative stacks them.
""",
    ),
    cfg.FloatOpt(
        "disk_weight_multiplier",
        default=1.0,
        help="""
Multiplier of the disk weigher (free DISK_GB from Placement's provider summary, normalised to
0..1). Positive spreads instances, negative stacks them.
""",
    ),
    cfg.FloatOpt(
        "cached_image_weight_multiplier",
        default=10.0,
        help="""
Multiplier of the cached-image weigher: 1 for a host whose latest image cache report holds the
request's image, 0 otherwise (not Nova's; the blueprint Nova never landed). The default, above
the sum of the RAM and disk multipliers, puts every host holding the image before every host
that would have to download it; 0 turns it off.
""",
    ),
    cfg.StrOpt(
        "aggregate_image_properties_isolation_namespace",
        help="""
AggregateImagePropertiesIsolation checks only aggregate metadata keys that start with this
namespace followed by ``aggregate_image_properties_isolation_separator`` (Nova's option;
unset: every key).
""",
    ),
    cfg.StrOpt(
        "aggregate_image_properties_isolation_separator",
        default=".",
        help="""
The separator between ``aggregate_image_properties_isolation_namespace`` and the rest of an
aggregate metadata key (Nova's option).
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(filter_scheduler_group)
    conf.register_opts(filter_scheduler_opts, group=filter_scheduler_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(filter_scheduler_group, filter_scheduler_opts)]
