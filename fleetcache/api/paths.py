"""The URL paths the API is built around, and the ones served without a token.

Both the route table (``routes.py``) and the OpenAPI document (``openapi.py``) name paths; they
take them from here, so neither needs the other.
"""

from __future__ import annotations

PREFIX = "/v2.1"
AGGREGATE = PREFIX + "/os-aggregates/{aggregate_id}"
FLAVORS = PREFIX + "/flavors"
FLAVOR = FLAVORS + "/{flavor_id}"
SERVERS = PREFIX + "/servers"
SERVER = SERVERS + "/{server_id}"
OPENAPI = "/openapi.json"

#: Served without authentication: version discovery and the OpenAPI document.
PUBLIC_PATHS = frozenset({"/", PREFIX, OPENAPI})
