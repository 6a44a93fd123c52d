"""The names fleetcache's services register under (``services.binary``) and log as, and the
names of Nova's services whose parts they play.

One place for them: the API filters ``os-services`` by them, the conductor asks which hosts run
a compute, ``fleetcache-manage`` and the daemons register with them. The compute API shows a
service under Nova's name of its part (:data:`NOVA_NAMES`), as a Nova-compatible API must:
clients and tools look for compute hosts as ``nova-compute``.
"""

from __future__ import annotations

API = "fleetcache-api"
CONDUCTOR = "fleetcache-conductor"
COMPUTE = "fleetcache-compute"

#: The Nova service each fleetcache service plays the part of, by fleetcache name. The compute
#: API (``os-services``, ``os-availability-zone/detail``) shows services under these names;
#: ``fleetcache-manage``, the logs and the database keep fleetcache's.
NOVA_NAMES = {
    COMPUTE: "nova-compute",
    CONDUCTOR: "nova-conductor",
}
