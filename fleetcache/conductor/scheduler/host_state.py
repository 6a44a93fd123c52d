"""One candidate host as the host filters and weighers see it: its compute service, its
aggregates, and what Placement said of its provider (free resources, traits, the allocation
request to claim it with). Built in bulk per request (:func:`build_host_states`): one query
for the services, one for aggregate membership, whatever the number of candidates."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from fleetcache.common.db import scheduling
from fleetcache.common.db import services as db_services
from fleetcache.common.db.scheduling import ComputeStatus
from fleetcache.common.db.session import Database
from fleetcache.conductor.placement.provider import provider_uuid
from fleetcache.conductor.scheduler.aggregates import AggregateCatalog


@dataclasses.dataclass
class HostState:
    """A candidate host. ``resources`` is Placement's provider summary
    (``{rc: {"capacity": c, "used": u}}``, the decoded response's own dict, not a copy), kept
    current as this request claims on it."""

    host: str
    provider_uuid: str
    service: ComputeStatus | None
    aggregates: frozenset[str]
    #: The union of the host's aggregate metadata, values split on commas.
    metadata: dict[str, set[str]]
    resources: dict[str, dict[str, int]]
    traits: frozenset[str]
    allocation_request: Mapping[str, Any]

    @property
    def cell_id(self) -> int | None:
        return self.service["cell_id"] if self.service is not None else None

    def free(self, resource_class: str) -> float:
        record = self.resources.get(resource_class)
        if record is None:
            return 0.0
        return float(record["capacity"]) - float(record["used"])

    def fits(self, amounts: Mapping[str, int]) -> bool:
        """Whether the summary leaves room for ``amounts`` (a class the summary does not show
        is left to Placement, which refuses a claim beyond capacity)."""
        return all(self.free(rc) >= n for rc, n in amounts.items() if rc in self.resources)

    def consume(self, amounts: Mapping[str, int]) -> None:
        """Count a claim this request made on the host (Nova's ``consume_from_request``)."""
        for rc, n in amounts.items():
            if rc in self.resources:
                self.resources[rc]["used"] = int(self.resources[rc]["used"]) + n


class ProviderHosts:
    """Maps compute resource provider uuids back to host names.

    A provider's uuid is derived from its host's name (:func:`provider_uuid`), which cannot
    be reversed, so the map is built from the compute services (20-50 ms for 10,000 on SQLite)
    and rebuilt when a candidate's provider is not in it and the compute services changed
    since (a compute registered): a provider that is no compute's (another user of the same
    Placement) costs one small query, not a rebuild per request. Nothing else is cached:
    services are read per request.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self._lock = threading.Lock()
        self._hosts: dict[str, str] = {}
        self._version: tuple[int, int] | None = None

    def hosts(self, providers: Iterable[str]) -> dict[str, str]:
        """``{provider uuid: host}`` of the providers that belong to a compute service."""
        wanted = list(providers)
        with self._lock:
            if any(p not in self._hosts for p in wanted):
                version = scheduling.compute_hosts_version(self.db)
                if version != self._version:
                    self._hosts = {provider_uuid(h): h for h in db_services.compute_hosts(self.db)}
                    self._version = version
            known = self._hosts
        return {p: known[p] for p in wanted if p in known}

    def count(self) -> int:
        """Compute hosts known at the last refresh."""
        with self._lock:
            return len(self._hosts)


def allocation_requests_by_root(
    candidates: Mapping[str, Any]
) -> dict[str, Mapping[str, Any]]:
    """The first allocation request of each root provider in a candidates response."""
    summaries = candidates.get("provider_summaries", {})
    by_root: dict[str, Mapping[str, Any]] = {}
    for request in candidates.get("allocation_requests", []):
        some_rp = next(iter(request["allocations"]))
        root = summaries.get(some_rp, {}).get("root_provider_uuid") or some_rp
        by_root.setdefault(root, request)
    return by_root


def build_host_states(
    db: Database,
    provider_hosts: ProviderHosts,
    catalog: AggregateCatalog,
    candidates: Mapping[str, Any],
) -> list[HostState]:
    """The hosts of a candidates response, in Placement's order. A provider that is no
    compute's (someone else's in the same Placement) is not a candidate."""
    by_root = allocation_requests_by_root(candidates)
    hosts = provider_hosts.hosts(by_root)
    names = list(hosts.values())
    services, memberships = scheduling.compute_status(db, names)
    summaries = candidates.get("provider_summaries", {})
    # hosts share few distinct sets of aggregates: work each set's metadata out once
    metadata: dict[frozenset[str], dict[str, set[str]]] = {}
    states = []
    for root, request in by_root.items():
        host = hosts.get(root)
        if host is None:
            continue
        summary = summaries.get(root, {})
        aggregates = frozenset(memberships.get(host, ()))
        if aggregates not in metadata:
            metadata[aggregates] = catalog.host_metadata(aggregates)
        states.append(HostState(
            host=host, provider_uuid=root, service=services.get(host),
            aggregates=aggregates, metadata=metadata[aggregates],
            resources=summary.get("resources", {}),
            traits=frozenset(summary.get("traits", ())), allocation_request=request))
    return states
