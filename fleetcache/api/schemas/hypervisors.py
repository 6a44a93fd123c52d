"""Query strings of ``/os-hypervisors`` (nova/api/openstack/compute/schemas/hypervisors.py).

Below 2.53 Nova takes any query (unknown parameters are ignored); from 2.53 the list, the
detail and the show take only their own parameters, each once, and refuse anything else (400).
The schemas apply to the query as a dict of lists (:func:`fleetcache.api.validation.
validate_query`).
"""

from __future__ import annotations

from typing import Any

from fleetcache.api.schemas import parameter_types


def single_param(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter given at most once (Nova's ``single_param``)."""
    return {"type": "array", "items": schema, "maxItems": 1}


#: Nova's ``non_negative_integer`` as query text.
_NON_NEGATIVE = {"type": "string", "pattern": "^[0-9]+" + parameter_types.END,
                 "description": "digits"}
#: Nova's ``fqdn`` type: what a hypervisor host name pattern may hold.
HOSTNAME_PATTERN = {"type": "string", "minLength": 1, "maxLength": 255,
                    "pattern": "^[a-zA-Z0-9-._]*" + parameter_types.END,
                    "description": "letters, digits, '-', '.' and '_'"}

INDEX_QUERY_V2_53: dict[str, Any] = {
    "type": "object",
    "properties": {
        "limit": single_param(_NON_NEGATIVE),
        "marker": single_param({"type": "string"}),
        "hypervisor_hostname_pattern": single_param(HOSTNAME_PATTERN),
        "with_servers": single_param(parameter_types.BOOLEAN),
    },
    "additionalProperties": False,
}
SHOW_QUERY_V2_53: dict[str, Any] = {
    "type": "object",
    "properties": {"with_servers": single_param(parameter_types.BOOLEAN)},
    "additionalProperties": False,
}
