"""Which transport URLs the lean caller serves, and how it connects to their broker.

Served: plain ``rabbit://`` URLs (one host or several) without query options, with
``[oslo_messaging_rabbit]`` settings the caller carries over (credentials, vhost, login
method, AMQP heartbeats, the retry interval and its back-off, the reply queue's
``x-expires``, the control exchange's durability, the notification queues' arguments, quorum
ones with ``rabbit_quorum_queue``). Anything else is refused with the reason, and the
conductor keeps oslo.messaging's client for it: other drivers (``fake://``, Kafka, AMQP 1.0),
TLS (``ssl``), quorum reply queues, HA or stream queues, oslo.messaging's tracing or metrics
hooks (they are called from its client only), query options.

Several hosts in one URL are tried in turn, from the one that last worked, as kombu's
``round-robin`` failover does; ``kombu_failover_strategy = shuffle`` starts at a random one.
"""

from __future__ import annotations

import dataclasses
import os
import random
import socket
import sys
from typing import Any

import amqp
from oslo_config import cfg
from oslo_messaging._drivers import amqp as rpc_amqp
from oslo_messaging._drivers import impl_rabbit

from fleetcache.common import rpc

#: Seconds to open the TCP connection and finish the AMQP handshake with one host.
CONNECT_TIMEOUT = 10.0

#: Bytes asked of the socket per ``recv`` (:class:`BufferedRecv`).
RECV_SIZE = 65536


@dataclasses.dataclass(frozen=True)
class Host:
    hostname: str
    port: int
    userid: str
    password: str


@dataclasses.dataclass(frozen=True)
class BrokerParams:
    """Everything the caller needs to reach one broker (vhost) the way oslo.messaging does."""

    hosts: tuple[Host, ...]
    virtual_host: str
    login_method: str
    #: AMQP heartbeat negotiated with the broker (``heartbeat_timeout_threshold``), 0: none.
    heartbeat: int
    #: How many times per heartbeat interval it is checked (``heartbeat_rate``).
    heartbeat_rate: int
    retry_interval: float
    retry_backoff: float
    retry_interval_max: float
    #: The reply queue's ``x-expires`` in seconds (``rabbit_transient_queues_ttl``), 0: none.
    reply_queue_ttl: int
    #: ``[DEFAULT] control_exchange``, where topic calls are published, and how it and the
    #: notification queues are declared.
    exchange: str
    exchange_durable: bool
    exchange_auto_delete: bool
    shuffle: bool
    #: The notification queues' ``queue_declare`` arguments (:func:`notification_queue_arguments`).
    queue_arguments: tuple[tuple[str, Any], ...] = ()

    def first_host(self) -> int:
        return random.randrange(len(self.hosts)) if self.shuffle else 0


class Unsupported(Exception):
    """The transport needs something only oslo.messaging's client does (the reason)."""


def register_opts(conf: cfg.ConfigOpts) -> None:
    """``[oslo_messaging_rabbit]``, as the rabbit driver registers it on first use."""
    conf.register_opts(impl_rabbit.rabbit_opts, group="oslo_messaging_rabbit")
    conf.register_opts(rpc_amqp.amqp_opts, group="oslo_messaging_rabbit")


def params_for(conf: cfg.ConfigOpts, url: str | None) -> BrokerParams:
    """The broker behind ``url`` (``None``: ``[DEFAULT] transport_url``).

    :raises Unsupported: naming what only oslo.messaging's client supports.
    :raises InvalidTransportURL: an unparsable URL.
    """
    register_opts(conf)
    parsed = rpc.parse_transport_url(conf, url)
    if parsed.transport != "rabbit":
        raise Unsupported(f"driver {parsed.transport!r} is not plain rabbit")
    if parsed.query:
        raise Unsupported(f"URL options {sorted(parsed.query)}")
    if not parsed.hosts:
        raise Unsupported("no host in the URL")
    rabbit = conf.oslo_messaging_rabbit
    for option in ("ssl", "rabbit_ha_queues", "rabbit_transient_quorum_queue",
                   "rabbit_stream_fanout"):
        if getattr(rabbit, option, False):
            raise Unsupported(f"[oslo_messaging_rabbit] {option}")
    for group, option in (("oslo_messaging_tracing", "tracing_enabled"),
                          ("oslo_messaging_metrics", "metrics_enabled")):
        if getattr(getattr(conf, group, None), option, False):
            raise Unsupported(f"[{group}] {option}")
    hosts = tuple(Host(h.hostname or "localhost", h.port or 5672, h.username or "guest",
                       h.password or "guest") for h in parsed.hosts)
    return BrokerParams(
        hosts=hosts, virtual_host=parsed.virtual_host or "/",
        login_method=rabbit.rabbit_login_method,
        heartbeat=int(rabbit.heartbeat_timeout_threshold),
        heartbeat_rate=max(1, int(rabbit.heartbeat_rate)),
        retry_interval=float(rabbit.rabbit_retry_interval),
        retry_backoff=float(rabbit.rabbit_retry_backoff),
        retry_interval_max=float(rabbit.rabbit_interval_max),
        reply_queue_ttl=int(rabbit.rabbit_transient_queues_ttl),
        exchange=conf.control_exchange,
        # oslo.messaging's Connection.durable: quorum queues are durable, whatever
        # amqp_durable_queues says, and so is the exchange they are declared with.
        exchange_durable=bool(rabbit.amqp_durable_queues or rabbit.rabbit_quorum_queue),
        exchange_auto_delete=bool(rabbit.amqp_auto_delete),
        shuffle=rabbit.kombu_failover_strategy == "shuffle",
        queue_arguments=notification_queue_arguments(rabbit),
    )


def notification_queue_arguments(rabbit: Any) -> tuple[tuple[str, Any], ...]:
    """The arguments oslo.messaging's rabbit driver declares a notification queue with, for
    the same ``[oslo_messaging_rabbit]`` options (``rabbit``): ``x-queue-type: quorum`` and
    its limits with ``rabbit_quorum_queue``, none otherwise; no TTL (its notifier passes 0).

    Derived from the options rather than by calling ``impl_rabbit._get_queue_arguments``,
    which is private (no promise that it keeps its parameters); a unit test compares the two.
    HA and stream queues are not served (:func:`params_for`). RabbitMQ refuses to declare a
    queue it holds with other arguments (406 ``inequivalent arg``).
    """
    if not rabbit.rabbit_quorum_queue:
        return ()
    arguments: list[tuple[str, Any]] = [("x-queue-type", "quorum")]
    for name, option in (("x-delivery-limit", "rabbit_quorum_delivery_limit"),
                         ("x-max-in-memory-length", "rabbit_quorum_max_memory_length"),
                         ("x-max-in-memory-bytes", "rabbit_quorum_max_memory_bytes")):
        value = getattr(rabbit, option)
        if value:
            arguments.append((name, value))
    return tuple(arguments)


def connect(params: BrokerParams, index: int, name: str) -> amqp.Connection:
    """An open connection to ``params.hosts[index]``.

    :param name: shown by ``rabbitmqctl list_connections client_properties``.
    :raises OSError, amqp.exceptions.AMQPError: the host cannot be reached or refuses.
    """
    host = params.hosts[index]
    conn = amqp.Connection(
        host=f"{host.hostname}:{host.port}", userid=host.userid, password=host.password,
        virtual_host=params.virtual_host, login_method=params.login_method,
        heartbeat=params.heartbeat, connect_timeout=CONNECT_TIMEOUT,
        client_properties={
            "connection_name": f"{os.path.basename(sys.argv[0])}:{os.getpid()}:{name}",
            "capabilities": {"authentication_failure_close": True,
                             "consumer_cancel_notify": True},
        },
    )
    try:
        conn.connect()
    except BaseException:
        conn.collect()
        raise
    return conn


def socket_of(conn: amqp.Connection) -> socket.socket:
    sock = conn.transport.sock
    assert sock is not None
    return sock  # type: ignore[no-any-return]


class BufferedRecv:
    """``sock.recv`` for py-amqp's ``TCPTransport``, reading up to :data:`RECV_SIZE` bytes
    per system call and handing them out as asked.

    NOTE: py-amqp reads exactly what it needs (a frame's 7-byte header, its payload, its end
    byte): three ``recv`` calls per frame, nine per delivered reply, each dropping and
    retaking the GIL the conductor's other threads are waiting for. Each system call is a
    ``recv_into`` one buffer kept for the connection, copied out at the size that came:
    ``recv(65536)`` allocated 64 KiB and shrank it to what came at every call, in the
    receiving thread's malloc arena, which kept them (docs/performance.md, "Conductor memory
    with one receive buffer per connection"); the copy costs 0.1-0.2 µs per reply, measured
    on a socket pair.
    """

    __slots__ = ("_recv_into", "_into", "_received", "_buf", "_pos")

    def __init__(self, sock: socket.socket) -> None:
        self._recv_into = sock.recv_into
        self._into = bytearray(RECV_SIZE)
        self._received = memoryview(self._into)
        self._buf = b""
        self._pos = 0

    def __call__(self, n: int) -> bytes:
        buf, pos = self._buf, self._pos
        if pos >= len(buf):
            got = self._recv_into(self._into)
            if not got:
                return b""  # the peer closed
            buf = self._received[:got].tobytes()
            self._buf, pos = buf, 0
        chunk = buf[pos:pos + n]
        self._pos = pos + len(chunk)
        return chunk

    @property
    def pending(self) -> bool:
        """Bytes received and not handed out yet (the socket may look empty meanwhile)."""
        return self._pos < len(self._buf)
