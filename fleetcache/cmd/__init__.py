"""Console-script entry points (``fleetcache-*``): thin, they parse configuration and start a
role. Shared start-up steps are in :mod:`fleetcache.cmd.common`.

NOTE: oslo.messaging imports oslo.service, which imports eventlet, which warns on import that it
is deprecated. fleetcache never uses eventlet (threading executor only), so that warning is
silenced here, before any command imports oslo.messaging.
"""

import warnings

warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
