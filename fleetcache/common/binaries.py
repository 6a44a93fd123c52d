"""The names fleetcache's services register under (``services.binary``) and log as.

One place for them: the API filters ``os-services`` by them, the conductor asks which hosts run
a compute, ``fleetcache-manage`` and the daemons register with them.
"""

from __future__ import annotations

API = "fleetcache-api"
CONDUCTOR = "fleetcache-conductor"
COMPUTE = "fleetcache-compute"
