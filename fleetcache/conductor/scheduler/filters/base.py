"""The host filter seam: a filter says, per host, why the host cannot take the request (or
``None``: it can). The runner (:mod:`fleetcache.conductor.scheduler.filters.runner`) logs every
decision at debug and counts hosts in and out, so each filter only states its rule."""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.conductor.scheduler.host_state import HostState
from fleetcache.conductor.scheduler.request import FilterRequest


class BaseHostFilter:
    """Base of every host filter; subclasses implement :meth:`host_fails`.

    :param conf: the conductor's configuration; a filter reads its options once, here (an
        oslo.config lookup per host was a third of the filters' time at 1,000 hosts).
    """

    #: Whether the filter checks a rebuild (a new image on the instance's own host, same
    #: flavor, nothing claimed): True for a rule about the image, which is what a rebuild
    #: changes; a filter whose rule is about the host or the flavor says False (Nova's
    #: ``RUN_ON_REBUILD``). True by default, unlike Nova's False, so that a filter from
    #: another package that does not say still guards a rebuild (fails closed).
    run_on_rebuild: bool = True

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    @property
    def name(self) -> str:
        return type(self).__name__

    def host_fails(self, host: HostState, request: FilterRequest) -> str | None:
        """:returns: why ``host`` cannot take ``request``, or ``None`` when it can."""
        raise NotImplementedError
