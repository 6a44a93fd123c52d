"""The conductor's scheduler: where instances go, on OpenStack Placement.

``Scheduler.select_destinations`` runs request filters (one ``GET /allocation_candidates``
query), host filters, weighers, then claims each instance (``PUT /allocations``), retrying
with the next host on a conflict. Modules, one idea each:

* ``spec``: the request and selection values (the boot path builds and reads them);
* ``query``, ``request_filters``: the Placement query and the rules that build it;
* ``aggregates``: the aggregate metadata of one request and the isolation rules read from it;
* ``host_state``: candidates as hosts; ``filters/``: host filters and their loading;
* ``weighers``; ``claim``; ``destinations``: the whole flow.
"""

from fleetcache.conductor.scheduler.destinations import Scheduler
from fleetcache.conductor.scheduler.spec import FlavorSpec, RequestSpec, Selection

__all__ = ["FlavorSpec", "RequestSpec", "Scheduler", "Selection"]
