"""``kombu.Connection.autoretry`` without a new class per call.

kombu's ``autoretry`` (5.x, 5.7.0 here) defines a class, ``Revival``, inside the method and
instantiates it: every call creates a class object. oslo.messaging's rabbit driver calls it
through ``Connection.ensure`` on every publish (each RPC call, each reply, each notification)
and on every pass of a consumer's poll loop. A class is a large object with reference cycles
(its ``__dict__``, its ``__mro__``), so each one is also garbage that only the cyclic
collector frees, and it feeds the collector's generations.

NOTE: measured in ``fleetcache-conductor`` under ``bench/fanout.py --hosts 1000 --concurrency
64`` (py-spy, GIL samples): 6.3 % of the conductor's samples were in ``autoretry``'s own frame,
8.6 % with what it calls, about 0.15-0.2 ms of its 2.3 ms per host; defining and instantiating
the class takes about 8 us on this machine, an instance of a class defined once 0.2 us.
docs/performance.md, "Conductor CPU per host (issue 12)", has the figures after the change.

:func:`autoretry_without_class_per_call` replaces the method with one that builds an instance
of :class:`_Revival`, a class defined once, with the same behaviour: the same
``ensure(revive, revive, **ensure_options)``, the same first-use connection set-up with the
operation's retry options, the same ``(result, channel)`` return. It is applied by
:func:`fleetcache.common.rpc.init`, so by every daemon, and by ``bench/fanout.py``'s bare
client, so that the baseline keeps the same advantage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kombu import connection as kombu_connection

#: ``ensure`` options that also apply to establishing the first connection (kombu's list).
_CONNECT_OPTIONS = ("errback", "max_retries", "interval_start", "interval_step", "interval_max")


class _Revival:
    """What kombu's per-call ``Revival`` class does, as an instance: calls ``fun`` with the
    current channel, and takes the new one when ``ensure`` revives the connection."""

    def __init__(self, connection: Any, fun: Callable[..., Any], channel: Any,
                 ensure_options: dict[str, Any]) -> None:
        self.connection = connection
        self._fun = fun
        self._channel = channel
        self._ensure_options = ensure_options
        # kombu's ensure() names its wrapper after these.
        self.__name__ = getattr(fun, "__name__", None)
        self.__module__ = getattr(fun, "__module__", None)  # type: ignore[assignment]
        self.__doc__ = getattr(fun, "__doc__", None)

    def revive(self, channel: Any) -> None:
        self._channel = channel

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if self._channel is None:
            # Apply the operation's retry policy before default_channel can retry using only
            # the connection's transport options (as kombu does).
            conn_opts = self.connection._extract_failover_opts()
            conn_opts.update({key: self._ensure_options[key] for key in _CONNECT_OPTIONS
                              if key in self._ensure_options})
            self.connection._ensure_connection(**conn_opts)
            self.revive(self.connection.default_channel)
        return self._fun(*args, channel=self._channel, **kwargs), self._channel


def _autoretry(self: Any, fun: Callable[..., Any], channel: Any = None,
               **ensure_options: Any) -> Any:
    revive = _Revival(self, fun, channel, ensure_options)
    return self.ensure(revive, revive, **ensure_options)


def autoretry_without_class_per_call() -> None:
    """Patch ``kombu.Connection.autoretry`` (once per process; idempotent)."""
    cls: Any = kombu_connection.Connection
    if cls.autoretry is _autoretry:
        return
    _autoretry.__doc__ = cls.autoretry.__doc__
    cls.autoretry = _autoretry
