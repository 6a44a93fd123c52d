"""What one call per host costs over AMQP without oslo.messaging's client: the fan-out's floor.

A diagnostic of ``bench/fanout.py --lean-floor``, not fleetcache code. It calls
``cache_images(image_ids=[])`` on every host, as the bare baseline does, but speaks
oslo.messaging's wire format (envelope 2.0, ``_msg_id``, ``_reply_q``, ``_unique_id``) straight
through py-amqp, on one connection and one thread per cell: the thread keeps ``window``
calls outstanding, publishes the next call when a reply arrives, and takes publisher confirms
as they come (no wait per publish). The servers are the same unmodified oslo.messaging RPC
servers (the fake computes); replies come back on the default exchange to a queue of this
client's, as they do to oslo.messaging's reply queue.

What this leaves out, and a production path would need: reconnection and retry after a broker
failure, the call monitor's heartbeats, TLS and the other ``[oslo_messaging_rabbit]`` options,
remote exceptions re-raised as their classes. It measures the protocol's own CPU (py-amqp
framing, JSON, one socket per cell) beside what oslo.messaging's call costs on top of it.
"""

from __future__ import annotations

import json
import resource
import threading
import time
import uuid
from urllib.parse import unquote, urlsplit

import amqp
from _fleet import Cell

#: oslo.messaging's default ``control_exchange``, where topic calls are published.
EXCHANGE = "openstack"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _connect(url: str) -> amqp.Connection:
    parts = urlsplit(url)
    conn = amqp.Connection(host=f"{parts.hostname}:{parts.port or 5672}",
                           userid=unquote(parts.username or "guest"),
                           password=unquote(parts.password or "guest"),
                           virtual_host=unquote(parts.path[1:]) or "/")
    conn.connect()
    return conn


class _CellCaller:
    """One cell's hosts, called over one connection by one thread."""

    def __init__(self, cell: Cell, window: int) -> None:
        self.cell = cell
        self.window = window
        self.conn = _connect(cell.transport_url)
        self.channel = self.conn.channel()
        self.channel.confirm_select()
        self.channel.events["basic_ack"].add(self._on_confirm)
        self.reply_q = f"reply_lean_{uuid.uuid4().hex}"
        self.channel.queue_declare(self.reply_q, durable=False, auto_delete=True,
                                   exclusive=True)
        self.channel.basic_consume(self.reply_q, callback=self._on_reply, no_ack=True)
        self.pending: set[str] = set()
        self.confirmed = 0
        self.published = 0
        self.errors: list[str] = []

    def _on_confirm(self, delivery_tag: int, multiple: bool) -> None:
        # RabbitMQ confirms in publishing order; a tag confirms every one before it.
        self.confirmed = max(self.confirmed, delivery_tag)

    def _on_reply(self, message: amqp.Message) -> None:
        body = json.loads(json.loads(message.body)["oslo.message"])
        if not body.get("ending", True):
            return  # a call-monitor heartbeat
        if body.get("failure"):
            self.errors.append(str(body["failure"])[:200])
        self.pending.discard(body["_msg_id"])

    def _publish(self, host: str) -> None:
        msg_id = uuid.uuid4().hex
        inner = {"method": "cache_images", "args": {"image_ids": []}, "_msg_id": msg_id,
                 "_reply_q": self.reply_q, "_timeout": None,
                 "_unique_id": uuid.uuid4().hex}
        body = json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)})
        self.pending.add(msg_id)
        self.channel.basic_publish(
            amqp.Message(body, content_type="application/json", content_encoding="utf-8"),
            exchange=EXCHANGE, routing_key=f"compute.{host}")
        self.published += 1

    def run(self) -> None:
        hosts = iter(self.cell.hosts)
        for host in hosts:
            self._publish(host)
            if len(self.pending) >= self.window:
                break
        while self.pending:
            self.conn.drain_events(timeout=120)
            while len(self.pending) < self.window:
                host = next(hosts, None)
                if host is None:
                    break
                self._publish(host)
        deadline = time.monotonic() + 30
        while self.confirmed < self.published and time.monotonic() < deadline:
            try:
                self.conn.drain_events(timeout=max(0.1, deadline - time.monotonic()))
            except TimeoutError:
                break
        if self.confirmed < self.published:
            self.errors.append(f"{self.published - self.confirmed} publishes not confirmed")

    def close(self) -> None:
        self.conn.close()


class LeanFloor:
    """Per-cell lean callers, reused across rounds (connections stay open)."""

    def __init__(self, cells: list[Cell], concurrency: int) -> None:
        window = max(1, concurrency // len(cells))
        self.callers = [_CellCaller(cell, window) for cell in cells]

    def run(self) -> tuple[float, float]:
        """Call every host once. :returns: wall and this process's CPU, in seconds."""
        cpu, started = _cpu(), time.monotonic()
        threads = [threading.Thread(target=c.run, name=f"lean-{c.cell.name}")
                   for c in self.callers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall, spent = time.monotonic() - started, _cpu() - cpu
        errors = [e for c in self.callers for e in c.errors]
        if errors or any(c.pending for c in self.callers):
            raise RuntimeError(f"lean floor: {len(errors)} failures, e.g. {errors[:1]}")
        return wall, spent

    def cleanup(self) -> None:
        for caller in self.callers:
            caller.close()
