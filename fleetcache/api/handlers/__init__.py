"""Request handlers, one module per REST resource; routes are in ``fleetcache.api.routes``."""
