"""Tests of fleetcache.common.rpc: the transports a service owns."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from fleetcache.common import config, rpc


def _conf(transport_url: str) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    rpc.register_opts(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("transport_url", transport_url)
    return conf


def _vhost(transport: messaging.Transport) -> str:
    return str(transport._driver._url.virtual_host)


def test_a_new_config_never_gets_a_transport_built_for_an_earlier_one() -> None:
    """The old process-wide cache was keyed by ``id(conf)``: once a config was collected, a new
    one could get its id, and with it the earlier config's transport. Configs here are made
    and collected one after the other, so that ids do come back."""
    ids: set[int] = set()
    reused = False
    for n in range(20):
        conf = _conf(f"fake:///vhost{n}")
        reused = reused or id(conf) in ids
        ids.add(id(conf))
        transports = rpc.Transports(conf)
        transport = transports.get()
        assert transport.conf is conf
        assert _vhost(transport) == f"vhost{n}"
        assert transports.notification() is not transport
        assert transports.notification().conf is conf
        transports.cleanup()
        gone = weakref.ref(conf)
        del conf, transports, transport
        gc.collect()
        assert gone() is None  # nothing kept the earlier config alive
    assert reused, "no config got an earlier one's id: the case above was never exercised"


def test_one_transport_per_url_until_cleanup() -> None:
    conf = _conf("fake:///default")
    transports = rpc.Transports(conf)
    default = transports.get()
    assert transports.get(None) is default
    cell = transports.get("fake:///cell1")
    assert cell is not default and transports.get("fake:///cell1") is cell
    assert _vhost(cell) == "cell1"
    transports.cleanup()
    assert transports.get() is not default  # opened again after a cleanup
    transports.cleanup()


def test_two_services_of_one_process_share_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo and the functional tests run a conductor and computes in one process: each
    owns its transports, and stopping one closes none of the other's."""
    conf = _conf("fake:///")
    conductor, compute = rpc.Transports(conf), rpc.Transports(conf)
    theirs = compute.get()
    assert conductor.get() is not theirs
    closed: list[messaging.Transport] = []
    real_cleanup = messaging.Transport.cleanup

    def spy(self: messaging.Transport) -> None:
        closed.append(self)
        real_cleanup(self)

    monkeypatch.setattr(messaging.Transport, "cleanup", spy)
    conductor.cleanup()
    monkeypatch.undo()
    assert theirs not in closed and len(closed) == 1
    assert compute.get() is theirs
    compute.cleanup()


@pytest.mark.parametrize("url", ["rabbit://u:s3cret@h:notaport/", "rabbit://h:1,h2:x/",
                                 "rabbit://[::1/", "rabbit://u:pass/word@h/"])
def test_a_url_that_does_not_parse_is_an_invalid_transport_url(url: str) -> None:
    """oslo.messaging lets ``ValueError`` through for these: ``transports.get()`` and every
    other parse raise ``InvalidTransportURL``, quoting no part of the URL (``pass`` is part of
    the password in the last: the ``/`` in it ends the host part)."""
    conf = _conf(url)
    with pytest.raises(messaging.InvalidTransportURL) as caught:
        rpc.parse_transport_url(conf, None)
    assert str(caught.value) == ("it does not parse (is every host's port a number, every "
                                 "IPv6 address in [brackets]?)")
    transports = rpc.Transports(conf)
    with pytest.raises(messaging.InvalidTransportURL):
        transports.get()
    with pytest.raises(messaging.InvalidTransportURL):
        transports.notification()
    with pytest.raises(messaging.InvalidTransportURL):
        rpc.Transports(_conf("fake:///")).get(url)


@pytest.mark.parametrize("url", ["rabbit://u:s3cret@h:99999/", "rabbit://h:5672,h2:0/",
                                 "rabbit://h:-1/"])
def test_a_port_outside_the_tcp_range_is_an_invalid_transport_url(url: str) -> None:
    """oslo.messaging parses these; the resolver would take 99999 as port 34463."""
    conf = _conf(url)
    with pytest.raises(messaging.InvalidTransportURL) as caught:
        rpc.parse_transport_url(conf, None)
    assert str(caught.value) == "a host's port is not within 1-65535"
    with pytest.raises(messaging.InvalidTransportURL):
        rpc.Transports(conf).get()
    assert rpc.parse_transport_url(_conf("rabbit://h:65535,h2:1/"), None).hosts[0].port == 65535


def test_kafka_is_refused_for_rpc_and_a_missing_driver_library_is_a_driver_load_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka carries notifications only; a driver whose own library is missing is the
    ``DriverLoadFailure`` the daemons turn into one line, not an ``ImportError``."""
    conf = _conf("kafka://broker:9092/")
    with pytest.raises(messaging.InvalidTransportURL) as caught:
        rpc.parse_rpc_transport_url(conf, None)
    assert str(caught.value) == ("kafka:// carries notifications only (oslo.messaging's kafka "
                                 "driver has no RPC)")
    with pytest.raises(messaging.InvalidTransportURL):
        rpc.Transports(conf).get()
    assert rpc.parse_transport_url(conf, None).transport == "kafka"  # notifications: allowed

    def missing(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError("No module named 'confluent_kafka'")

    monkeypatch.setattr(messaging, "get_notification_transport", missing)
    with pytest.raises(messaging.DriverLoadFailure) as failed:
        rpc.Transports(conf).notification()
    assert str(failed.value) == ('Failed to load transport driver "kafka": No module named '
                                 "'confluent_kafka'")


def test_notifications_use_their_own_url_else_the_default_and_say_which() -> None:
    conf = _conf("fake:///default")
    transports = rpc.Transports(conf)
    assert _vhost(transports.notification()) == "default"
    assert rpc.transport_url_option(conf, notification=True) == "[DEFAULT] transport_url"
    transports.cleanup()
    conf.set_override("transport_url", "rabbit://h:xx/", group=rpc.NOTIFICATIONS_GROUP)
    assert transports.get() is not None  # the RPC transport does not use it
    with pytest.raises(messaging.InvalidTransportURL):
        transports.notification()
    assert (rpc.transport_url_option(conf, notification=True)
            == "[oslo_messaging_notifications] transport_url")
    assert rpc.transport_url_option(conf) == "[DEFAULT] transport_url"
    conf.set_override("transport_url", "fake:///notifications", group=rpc.NOTIFICATIONS_GROUP)
    assert _vhost(transports.notification()) == "notifications"
    transports.cleanup()


def test_cleanup_closes_the_others_when_one_fails_or_hangs(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The transports close side by side: one that raises or has not closed by the timeout is
    logged, and neither keeps the others open nor the caller waiting past the timeout."""
    conf = _conf("fake:///default")
    transports = rpc.Transports(conf)
    failing, hanging = transports.get("fake:///failing"), transports.get("fake:///hanging")
    others = [transports.get(), transports.get("fake:///cell1")]
    closed: list[messaging.Transport] = []
    release = threading.Event()
    real_cleanup = messaging.Transport.cleanup

    def cleanup(self: messaging.Transport) -> None:
        if self is failing:
            raise OSError("broker gone")
        if self is hanging:
            release.wait(10)
        real_cleanup(self)
        closed.append(self)

    monkeypatch.setattr(messaging.Transport, "cleanup", cleanup)
    began = time.monotonic()
    transports.cleanup(timeout=0.5)
    took = time.monotonic() - began
    release.set()
    assert 0.5 <= took < 2.0
    assert all(t in closed for t in others) and failing not in closed
    assert "Closing a transport failed" in caplog.text
    assert "did not close its transport within 0.5 s" in caplog.text
