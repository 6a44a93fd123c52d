"""RPC and notification plumbing on oslo.messaging.

Each service builds one :class:`Transports` at start-up, passes it to what sends or serves
messages, and cleans it up when it stops. It opens one transport per broker URL: the API-level
``[DEFAULT] transport_url`` and each cell's own ``transport_url`` (a cell may have its own
broker or vhost). Every message carries the
:class:`~fleetcache.common.context.RequestContext` through :class:`ContextSerializer`, and
fleetcache exceptions raised by a server are re-raised as the same class on the client.

Use::

    transports = rpc.Transports(conf)                  # at start-up
    client = rpc.get_client(transports.get(cell_url), "compute", version_cap="1.0")
    client.prepare(server="host1").call(ctxt, "cache_images", image_ids=[...])
    transports.cleanup()                               # at stop
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import oslo_messaging as messaging
from oslo_config import cfg
from oslo_messaging import conffixture
from oslo_messaging import opts as messaging_opts

from fleetcache.common import context as fc_context
from fleetcache.common import exception

LOG = logging.getLogger(__name__)

#: The notifications' options: ``transport_url`` (unset: ``[DEFAULT] transport_url``), driver.
NOTIFICATIONS_GROUP = "oslo_messaging_notifications"
#: Seconds :meth:`Transports.cleanup` waits for its transports to close: twice the 5 s that
#: closing one takes at most when the broker answers (see there); a broker that does not
#: answer must not hold the stop up until the supervisor's SIGKILL (``tools/stack.sh``: 15 s).
CLEANUP_TIMEOUT = 10.0
#: The highest TCP port.
MAX_PORT = 65535
#: oslo.messaging's drivers that send notifications but serve no RPC.
NOTIFICATION_ONLY_DRIVERS = frozenset({"kafka"})
#: Modules whose exceptions oslo.messaging may re-create on the client side.
ALLOWED_EXMODS = ["fleetcache.common.exception"]
#: What a call or cast raises when the bus cannot take or deliver it: oslo.messaging's
#: ``MessageUndeliverable`` (a mandatory message no queue took) is not a ``MessagingException``.
DELIVERY_ERRORS: tuple[type[Exception], ...] = (messaging.MessagingException,
                                                messaging.MessageUndeliverable)


def register_opts(conf: cfg.ConfigOpts,
                  groups: tuple[str | None, ...] = (None,)) -> None:
    """Register oslo.messaging's options of ``groups`` (``None``: ``[DEFAULT]``:
    ``transport_url``, ``rpc_response_timeout``, ``executor_thread_pool_size``...) before
    parsing, so that a daemon can give them its own defaults and bad values are caught at
    start-up."""
    for group, opts in messaging_opts.list_opts():
        if (None if group == "DEFAULT" else group) in groups:
            conf.register_opts(opts, group=group if group != "DEFAULT" else None)


def init(conf: cfg.ConfigOpts) -> None:
    """Register every option oslo.messaging reads on ``conf``.

    NOTE(oslo.messaging): 18.3.1 registers its tracing and metrics option groups
    (``oslo_messaging_tracing``, ``oslo_messaging_metrics``) only on the global ``cfg.CONF``;
    with any other ``ConfigOpts`` every ``call`` and ``cast`` raises ``NoSuchOptError: no such
    option oslo_messaging_tracing``. Its public ``ConfFixture`` registers every group it reads
    (building one registers them; nothing else of the fixture is used), which keeps private
    configurations (tests, the demo) working. ``[oslo_messaging_notifications]`` comes with it:
    its ``transport_url`` is read before ``get_notification_transport`` would register it.
    """
    conffixture.ConfFixture(conf)


def parse_transport_url(conf: cfg.ConfigOpts, url: str | None) -> messaging.TransportURL:
    """``url`` parsed (``None``: ``[DEFAULT] transport_url``).

    NOTE: oslo.messaging 18.3.1's ``TransportURL.parse`` lets a bare ``ValueError`` through for
    a host whose port is not a number (``rabbit://h:notaport/``: ``int()`` in oslo.utils'
    ``parse_host_port``) or an IPv6 address without its ``]`` (``urlparse``); it is turned
    into ``InvalidTransportURL`` here, around the parsing only. Its text is not repeated: it
    may quote part of a password (a ``/`` in one ends the URL's host part).

    A port above 65535 parses there too, and py-amqp's ``getaddrinfo`` then connects to it
    modulo 65536 (``h:99999`` is port 34463: another service, or a refusal retried for ever):
    refused here, at start-up.

    :raises InvalidTransportURL: when the URL does not parse.
    """
    try:
        parsed = messaging.TransportURL.parse(conf, url)
    except ValueError as exc:
        raise messaging.InvalidTransportURL(
            url, "it does not parse (is every host's port a number, every IPv6 address in "
            "[brackets]?)") from exc
    if any(host.port is not None and not 0 < host.port <= MAX_PORT for host in parsed.hosts):
        raise messaging.InvalidTransportURL(url, f"a host's port is not within 1-{MAX_PORT}")
    return parsed


def parse_rpc_transport_url(conf: cfg.ConfigOpts, url: str | None) -> messaging.TransportURL:
    """``url`` parsed as :func:`parse_transport_url` does, for RPC: not ``kafka://``, whose
    oslo.messaging driver carries notifications only.

    :raises InvalidTransportURL:
    """
    parsed = parse_transport_url(conf, url)
    if parsed.transport in NOTIFICATION_ONLY_DRIVERS:
        raise messaging.InvalidTransportURL(
            url, f"{parsed.transport}:// carries notifications only (oslo.messaging's "
            f"{parsed.transport} driver has no RPC)")
    return parsed


def transport_url_option(conf: cfg.ConfigOpts, notification: bool = False) -> str:
    """The option a service's own RPC (or, with ``notification``, notification) transport URL
    comes from, for messages."""
    if notification and conf[NOTIFICATIONS_GROUP].transport_url:
        return f"[{NOTIFICATIONS_GROUP}] transport_url"
    return "[DEFAULT] transport_url"


class Transports:
    """The transports of one service, one per broker URL, opened on first use.

    Owned by the service that builds it (at start-up, from its configuration) and passed to
    its clients and servers; :meth:`cleanup` closes them when the service stops. Nothing is
    shared between two instances, so a configuration only ever gets transports built from it.
    """

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        init(conf)
        self.conf = conf
        self._opened: dict[tuple[str | None, bool], messaging.Transport] = {}
        self._lock = threading.Lock()

    def get(self, url: str | None = None) -> messaging.Transport:
        """The RPC transport for ``url`` (``None``: ``[DEFAULT] transport_url``)."""
        return self._get(url, notification=False)

    def notification(self, url: str | None = None) -> messaging.Transport:
        """The notification transport (``None``: ``[oslo_messaging_notifications]
        transport_url``, else ``[DEFAULT] transport_url``)."""
        return self._get(url, notification=True)

    def _get(self, url: str | None, notification: bool) -> messaging.Transport:
        with self._lock:
            transport = self._opened.get((url, notification))
            if transport is None:
                transport = self._opened[(url, notification)] = self._open(url, notification)
            return transport

    def _open(self, url: str | None, notification: bool) -> messaging.Transport:
        if notification:
            if url is None:  # as get_notification_transport reads it
                url = self.conf[NOTIFICATIONS_GROUP].transport_url
            parsed = parse_transport_url(self.conf, url)
            factory = messaging.get_notification_transport
        else:
            parsed = parse_rpc_transport_url(self.conf, url)
            factory = messaging.get_rpc_transport
        try:
            return factory(self.conf, url=parsed, allowed_remote_exmods=ALLOWED_EXMODS)
        except ImportError as exc:
            # NOTE: oslo.messaging 18.3.1 raises DriverLoadFailure for a driver it cannot find,
            # but lets the ImportError of one it finds whose library is missing through
            # (kafka:// without confluent_kafka): a traceback at start-up.
            raise messaging.DriverLoadFailure(parsed.transport, exc) from exc

    def cleanup(self, timeout: float = CLEANUP_TIMEOUT) -> None:
        """Close every transport opened here, side by side (the service is stopping);
        idempotent. A transport still closing after ``timeout`` seconds is logged and left to
        the process's exit (the broker drops its queues with the connection).

        NOTE: closing a transport that has made RPC calls joins its reply consumer thread
        (oslo.messaging 18.3.1 ``ReplyWaiter.stop``), which leaves ``consume`` only when its
        wait ends: up to ``amqpdriver.ACK_REQUEUE_EVERY_SECONDS_MAX`` (5 s) once the reply
        queue has been idle for about 8 s, and the thread cannot be woken earlier. A
        conductor with 4 cells whose reply queues had gone idle at different moments took
        22.4 s from SIGTERM to exit with the transports closed one after another, 4 x 5 s;
        side by side they take the longest one's wait.
        """
        with self._lock:
            transports = list(self._opened.values())
            self._opened.clear()
        threads = [threading.Thread(target=_cleanup_one, args=(transport,), daemon=True,
                                    name=f"transport-cleanup-{n}")
                   for n, transport in enumerate(transports)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                LOG.warning("%s did not close its transport within %.1f s; leaving it",
                            thread.name, timeout)


def _cleanup_one(transport: messaging.Transport) -> None:
    try:
        transport.cleanup()
    except Exception:
        LOG.exception("Closing a transport failed")


class ContextSerializer(messaging.Serializer):  # type: ignore[misc]
    """Carries the request context across RPC; payloads are plain JSON types."""

    def serialize_entity(self, ctxt: Any, entity: Any) -> Any:
        return entity

    def deserialize_entity(self, ctxt: Any, entity: Any) -> Any:
        return entity

    def serialize_context(self, ctxt: fc_context.RequestContext) -> dict[str, Any]:
        return ctxt.to_dict()

    def deserialize_context(self, ctxt: dict[str, Any]) -> fc_context.RequestContext:
        return fc_context.RequestContext.from_dict(ctxt)


_F = TypeVar("_F", bound=Callable[..., Any])


def expected_exceptions(*exceptions: type[Exception]) -> Callable[[_F], _F]:
    """``oslo_messaging.expected_exceptions``, typed: an endpoint method's errors that are the
    caller's fault, logged by the server at debug level only and re-raised on the client."""
    return cast(Callable[[_F], _F], messaging.expected_exceptions(*exceptions))


def prepare(client: messaging.RPCClient, method: str, version: str, **kwargs: Any) -> Any:
    """``client`` prepared at ``version`` for ``method``; refused at once when the client's
    version cap (``[upgrade_levels]``) does not allow it, instead of failing on the server.

    :raises RPCVersionCapped: naming the topic, the cap, the method and the version.
    """
    if not client.can_send_version(version):
        raise exception.RPCVersionCapped(topic=client.target.topic, cap=client.version_cap,
                                         method=method, version=version)
    return client.prepare(version=version, **kwargs)


def get_client(
    transport: messaging.Transport, topic: str, version_cap: str | None = None
) -> messaging.RPCClient:
    """An RPC client for ``topic``; callers ``prepare()`` it per call."""
    target = messaging.Target(topic=topic)
    return messaging.get_rpc_client(
        transport, target, version_cap=version_cap, serializer=ContextSerializer()
    )


def get_server(
    transport: messaging.Transport, topic: str, server: str, endpoints: list[Any],
) -> messaging.MessageHandlingServer:
    """A threading RPC server for ``topic`` on ``server`` (the executor is left to its default:
    passing ``executor=`` is deprecated, and threading is what it picks)."""
    target = messaging.Target(topic=topic, server=server)
    return messaging.get_rpc_server(transport, target, endpoints,
                                    serializer=ContextSerializer(),
                                    access_policy=messaging.DefaultRPCAccessPolicy)


def get_notifier(transport: messaging.Transport, publisher_id: str) -> messaging.Notifier:
    """A notifier on ``transport`` (:meth:`Transports.notification`) using
    ``[oslo_messaging_notifications]`` (driver, topics)."""
    return messaging.Notifier(
        transport, publisher_id=publisher_id, serializer=ContextSerializer()
    )
