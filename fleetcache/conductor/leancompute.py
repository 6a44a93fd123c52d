"""The conductor's compute client whose ``cache_images`` calls go through a lean caller.

Pre-cache and catch-up call every host of an aggregate with ``cache_images``; on a plain
``rabbit://`` cell transport these calls go through one :class:`~fleetcache.common.leanamqp.
caller.AmqpCaller` per cell (one connection, one thread, calls pipelined) instead of one
blocking oslo.messaging ``call`` each. The computes see the same messages: their unmodified
oslo.messaging RPC servers answer. Every other method (instance disks) stays on
oslo.messaging's client, which :class:`LeanComputeAPI` inherits.

NOTE: ``bench/fanout.py --hosts 1000 --concurrency 64`` measured the conductor at 1.92-2.14
ms of CPU per host with oslo.messaging's client, about 1.65 ms of it oslo.messaging, kombu
and py-amqp (docs/performance.md, "Conductor CPU per host (issue 12)").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import oslo_messaging as messaging
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.common.leanamqp.caller import AmqpCaller, OnDone
from fleetcache.compute.rpcapi import (
    TOPIC,
    ComputeAPI,
    ImageResult,
    cache_images_message,
)


class LeanComputeAPI(ComputeAPI):
    """:class:`ComputeAPI` with ``cache_images`` sent through ``caller``.

    Same versions, version cap (``[upgrade_levels] compute``), timeouts (``long_rpc_timeout``
    hard, ``rpc_response_timeout`` as the call monitor) and errors as the parent's.
    """

    def __init__(self, conf: cfg.ConfigOpts, transport: messaging.Transport,
                 caller: AmqpCaller) -> None:
        super().__init__(conf, transport)
        self.caller = caller
        self._can_send = {v: self.client.can_send_version(v) for v in ("1.0", "1.2")}

    def cache_images(
        self, ctxt: RequestContext, host: str, image_ids: list[str],
        pin_until: float | None = None,
    ) -> dict[str, ImageResult]:
        """As :meth:`ComputeAPI.cache_images`. :raises RPCVersionCapped, MessagingTimeout:"""
        replies = self._send(self.caller.call, ctxt, host, image_ids, pin_until)
        return cast("dict[str, ImageResult]", replies)

    def cache_images_async(
        self, ctxt: RequestContext, host: str, image_ids: list[str],
        pin_until: float | None, on_done: OnDone,
    ) -> None:
        """:meth:`cache_images` without waiting: ``on_done(value, failed)`` gets the replies
        or the exception, on the caller's thread (:meth:`AmqpCaller.call_async`).

        :raises RPCVersionCapped, MessageDeliveryFailure: at once; ``on_done`` is not called.
        """
        self._send(self.caller.call_async, ctxt, host, image_ids, pin_until, on_done=on_done)

    def _send(self, send: Callable[..., Any], ctxt: RequestContext, host: str,
              image_ids: list[str], pin_until: float | None, **extra: Any) -> Any:
        """``cache_images`` through ``send`` (the caller's ``call`` or ``call_async``), with
        the parent's versions and version cap and timeouts.

        :raises RPCVersionCapped: before anything is sent.
        """
        version, args = cache_images_message(image_ids, pin_until)
        if not self._can_send[version]:
            raise exception.RPCVersionCapped(topic=TOPIC, cap=self.version_cap,
                                             method="cache_images", version=version)
        return send(f"{TOPIC}.{host}", "cache_images", args, version=version,
                    context=ctxt.to_dict(), timeout=self.conf.long_rpc_timeout,
                    call_monitor_timeout=self.conf.rpc_response_timeout, **extra)
