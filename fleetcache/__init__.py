"""fleetcache: put VM images where they will be needed, before they are needed.

The package has one room per role (see ``docs/architecture.md``)::

    cmd -> api | conductor | compute -> image | privsep -> common

A role may import another role's ``rpcapi`` module (its RPC client) and nothing else of it.
"""

__version__ = "0.1.0"
