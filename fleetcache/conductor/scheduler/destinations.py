"""``select_destinations``: where each instance of a request goes, claimed in Placement.

1. Request filters build one ``GET /allocation_candidates`` query (resources, required and
   forbidden traits, aggregates in and out, ``limit``).
2. The candidates become :class:`HostState` objects in bulk (one query each for services and
   aggregate membership), and the enabled host filters run over them (none for the admin's
   forced host on a new build, as Nova's ``force_hosts``; a rebuild's own host goes through
   those whose rule is about the image, ``run_on_rebuild``, as Nova's
   ``requested_destination`` and ``RUN_ON_REBUILD``).
3. Weighers order them.
4. Each instance is claimed in turn on the best host that takes it; a refused claim tries
   the next host; when the hosts run out the candidates are fetched once more (other claims
   may have moved the picture). Fewer than ``min_count`` placed, or any error: every claim
   this request made is released before the exception leaves.

One INFO line per request sums it up: candidates from Placement, hosts in and out of each
filter, claims refused, and where the instances went.
"""

from __future__ import annotations

import logging
import time

from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.common.db import scheduling
from fleetcache.common.db.session import Database
from fleetcache.conductor.placement import PlacementClient
from fleetcache.conductor.scheduler import request_filters
from fleetcache.conductor.scheduler.aggregates import AggregateCatalog
from fleetcache.conductor.scheduler.claim import Claimer
from fleetcache.conductor.scheduler.filters import BaseHostFilter, load_filters
from fleetcache.conductor.scheduler.filters.runner import FilterCount, run_filters
from fleetcache.conductor.scheduler.host_state import (
    HostState,
    ProviderHosts,
    build_host_states,
)
from fleetcache.conductor.scheduler.query import CandidateQuery
from fleetcache.conductor.scheduler.request import FilterRequest
from fleetcache.conductor.scheduler.spec import RequestSpec, Selection
from fleetcache.conductor.scheduler.weighers import BaseWeigher, load_weighers, weigh

LOG = logging.getLogger(__name__)

#: Nova's NoValidHost reason when the filters or the claims leave too few hosts.
NOT_ENOUGH_HOSTS = "There are not enough hosts available."


class Scheduler:
    """Built once per conductor process (``ConductorState.scheduler``).

    :param request_filter_list: default :func:`request_filters.get_request_filters` (conf).
    :param host_filters: default the enabled ones (:func:`load_filters`).
    :param weighers: default ``[filter_scheduler] weight_classes``.
    :raises InvalidConfiguration: an unknown filter or weigher.
    """

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        db: Database,
        client: PlacementClient,
        request_filter_list: list[request_filters.RequestFilter] | None = None,
        host_filters: list[BaseHostFilter] | None = None,
        weighers: list[BaseWeigher] | None = None,
    ) -> None:
        self.conf = conf
        self.db = db
        self.client = client
        self.request_filters = (request_filter_list if request_filter_list is not None
                                else request_filters.get_request_filters(conf))
        self.host_filters = host_filters if host_filters is not None else load_filters(conf)
        self.weighers = weighers if weighers is not None else load_weighers(conf, db)
        self.claimer = Claimer(client)
        self.provider_hosts = ProviderHosts(db)

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts, db: Database) -> Scheduler | None:
        """The scheduler ``conf`` describes; ``None`` when ``[placement]`` is not configured.

        :raises InvalidConfiguration:
        """
        client = PlacementClient.from_conf(conf)
        return cls(conf, db, client) if client is not None else None

    # -- the request ---------------------------------------------------------------------------

    def build_query(self, spec: RequestSpec) -> tuple[CandidateQuery, FilterRequest]:
        """The request filters' Placement query, and what the host filters get."""
        catalog = AggregateCatalog(scheduling.metadata_by_aggregate(self.db))
        query = request_filters.build_query(
            self.request_filters, spec, catalog, self.conf.scheduler.max_placement_results)
        return query, FilterRequest.of(spec, catalog)

    def candidates(
        self, query: CandidateQuery, request: FilterRequest
    ) -> tuple[list[HostState], list[FilterCount]]:
        """One Placement query, host filters and weighers: the hosts best first, and the
        hosts in and out of Placement and each filter."""
        response = self.client.get_allocation_candidates(query.params())
        hosts = build_host_states(self.db, self.provider_hosts, request.catalog, response)
        summary: list[FilterCount] = [("Placement", self.provider_hosts.count(), len(hosts))]
        if request.spec.force_host:
            # Nova's force_hosts: the admin's zone:host on a new build (RequestSpec refuses it
            # for a rebuild), so the host filters are not consulted.
            return hosts, summary
        host_filters = (self.host_filters if request.spec.claim
                        else [f for f in self.host_filters if f.run_on_rebuild])
        passed, counts = run_filters(host_filters, hosts, request)
        return weigh(self.weighers, passed, request), summary + counts

    def select_destinations(self, ctxt: RequestContext, spec: RequestSpec) -> list[Selection]:
        """Place and claim each of ``spec.instance_uuids``, in order.

        :returns: one selection per instance placed: all of them, or (when fewer hosts are
            left) at least ``spec.min_count``, in instance order; the instances without one
            hold no claim.
        :raises NoValidHost: fewer than ``min_count`` placed; nothing stays claimed.
        :raises PlacementError: Placement failed; nothing stays claimed.
        """
        started = time.monotonic()
        query, request = self.build_query(spec)
        min_count = max(1, min(spec.min_count, len(spec.instance_uuids)))
        if query.impossible:
            self._log(spec, [], [], 0, started, query.impossible)
            raise exception.NoValidHost(reason=NOT_ENOUGH_HOSTS, filter_summary=[])
        if not spec.claim:
            return self._check_only(spec, query, request, started)
        selections: list[Selection] = []
        summary: list[FilterCount] = []
        refused = 0
        try:
            hosts, summary = self.candidates(query, request)
            refreshed = False
            for instance_uuid in spec.instance_uuids:
                host, tried = self.claimer.claim_first(
                    instance_uuid, hosts, spec, query.resources)
                if host is None and not refreshed:
                    refreshed = True
                    hosts, summary = self.candidates(query, request)
                    host, n = self.claimer.claim_first(
                        instance_uuid, hosts, spec, query.resources)
                    tried += n
                refused += tried
                if host is None:
                    if tried:
                        # A PUT that timed out is sent again ([placement] connect_retries): a
                        # first attempt that commits after the second's 409, and after the
                        # read of the allocations that followed it, holds a claim counted as
                        # refused.
                        self.claimer.release_all([instance_uuid])
                    break
                selections.append(Selection(instance_uuid, host.host, host.cell_id,
                                            host.provider_uuid, host.allocation_request))
                hosts = weigh(self.weighers, hosts, request)
        except BaseException:
            self.claimer.release_all([s.instance_uuid for s in selections])
            raise
        if len(selections) < min_count:
            self.claimer.release_all([s.instance_uuid for s in selections])
            if refused:
                summary = [*summary, ("Claim", refused, 0)]
            self._log(spec, summary, [], refused, started, NOT_ENOUGH_HOSTS)
            raise exception.NoValidHost(reason=NOT_ENOUGH_HOSTS,
                                        filter_summary=[list(row) for row in summary])
        self._log(spec, summary, selections, refused, started, None)
        return selections

    def _check_only(self, spec: RequestSpec, query: CandidateQuery, request: FilterRequest,
                    started: float) -> list[Selection]:
        """A rebuild: the filters are asked again and nothing is claimed or released, since
        the instances keep the allocation they hold (a new claim for a consumer that has one
        is refused by Placement).

        NOTE: Placement still counts the instances' own allocation against the host, so a
        rebuild on a host with no room for a second copy of the flavor gets NoValidHost.
        """
        hosts, summary = self.candidates(query, request)
        if not hosts:
            self._log(spec, summary, [], 0, started, NOT_ENOUGH_HOSTS)
            raise exception.NoValidHost(reason=NOT_ENOUGH_HOSTS,
                                        filter_summary=[list(row) for row in summary])
        host = hosts[0]
        selections = [Selection(uuid, host.host, host.cell_id, host.provider_uuid,
                                host.allocation_request) for uuid in spec.instance_uuids]
        self._log(spec, summary, selections, 0, started, None)
        return selections

    def release(self, instance_uuid: str) -> None:
        """Delete ``instance_uuid``'s allocations (none is fine).

        :raises PlacementError:
        """
        self.claimer.release(instance_uuid)

    def release_all(self, instance_uuids: list[str]) -> None:
        """Release each claim; a failure is logged and the others still released."""
        self.claimer.release_all(instance_uuids)

    @staticmethod
    def _log(spec: RequestSpec, summary: list[FilterCount], selections: list[Selection],
             refused: int, started: float, failure: str | None) -> None:
        counts = ", ".join(f"{name} {n_in}->{n_out}" for name, n_in, n_out in summary)
        placed = ", ".join(f"{s.instance_uuid}@{s.host}" for s in selections)
        LOG.info("select_destinations: %d instance(s) of image %s, flavor %s: %s; hosts "
                 "in->out: %s; claims refused %d; %.3fs",
                 len(spec.instance_uuids), spec.image_id, spec.flavor.flavorid,
                 f"no valid host ({failure})" if failure else f"placed {placed}",
                 counts or "none", refused, time.monotonic() - started)
