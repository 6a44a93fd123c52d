"""The URL paths the API is built around, and the ones served without a token.

Both the route table (``routes.py``) and the OpenAPI document (``openapi.py``) name paths; they
take them from here, so neither needs the other.
"""

from __future__ import annotations

PREFIX = "/v2.1"
#: The legacy v2.0 version document (only that: see handlers/versions.py).
LEGACY_PREFIX = "/v2"
AGGREGATE = PREFIX + "/os-aggregates/{aggregate_id}"
FLAVORS = PREFIX + "/flavors"
FLAVOR = FLAVORS + "/{flavor_id}"
HYPERVISORS = PREFIX + "/os-hypervisors"
HYPERVISOR = HYPERVISORS + "/{hypervisor_id}"
SERVERS = PREFIX + "/servers"
SERVER = SERVERS + "/{server_id}"
LIMITS = PREFIX + "/limits"
QUOTA_SET = PREFIX + "/os-quota-sets/{project_id}"
OPENAPI = "/openapi.json"
#: The status page (HTML) and the progress feed its script polls: admin-only, outside /v2.1.
STATUS = "/status"
STATUS_PROGRESS = STATUS + "/progress"
STATUS_PATHS = frozenset({STATUS, STATUS_PROGRESS})
#: One compute host's image cache report (a fleetcache extension).
HOST_IMAGE_CACHE = PREFIX + "/os-hosts/{host}/image-cache"

#: Served without authentication: version discovery and the OpenAPI document.
PUBLIC_PATHS = frozenset({"/", LEGACY_PREFIX, PREFIX, OPENAPI})
