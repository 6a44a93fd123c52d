"""Runs the enabled host filters over the candidates of one request, in order, stopping at
the first that leaves no host (as Nova's ``BaseFilterHandler.get_filtered_objects``); logs each
filter's decision per host at debug and returns the hosts in and out of every filter."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from fleetcache.conductor.scheduler.filters.base import BaseHostFilter
from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest

LOG = logging.getLogger(__name__)

#: ``(filter name, hosts in, hosts out)``
FilterCount = tuple[str, int, int]


def run_filters(
    filters: Sequence[BaseHostFilter], hosts: list[HostState], request: FilterRequest
) -> tuple[list[HostState], list[FilterCount]]:
    """:returns: the hosts that passed every filter, and the count per filter run."""
    debug = LOG.isEnabledFor(logging.DEBUG)
    summary: list[FilterCount] = []
    for host_filter in filters:
        if not hosts:
            break
        passed = []
        for host in hosts:
            reason = host_filter.host_fails(host, request)
            if reason is None:
                passed.append(host)
                if debug:
                    LOG.debug("%s: host %s passes", host_filter.name, host.host)
            elif debug:
                LOG.debug("%s: host %s fails: %s", host_filter.name, host.host, reason)
        summary.append((host_filter.name, len(hosts), len(passed)))
        hosts = passed
    return hosts, summary
