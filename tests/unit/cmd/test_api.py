"""``fleetcache-api``: gunicorn settings come from ``[api]``."""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.cmd import api, api_worker
from fleetcache.common import config


def _conf(**api_opts: object) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf.register_opt(cfg.BoolOpt("debug", default=False))
    conf([])
    for name, value in api_opts.items():
        conf.set_override(name, value, group="api")
    return conf


def test_gunicorn_options_from_api_group() -> None:
    options = api.gunicorn_options(
        _conf(bind_host="127.0.0.1", bind_port=18774, workers=3, threads=4, graceful_timeout=7)
    )
    assert options["bind"] == ["127.0.0.1:18774"]
    assert options["worker_class"] is api_worker.DeadlineThreadWorker
    assert (options["workers"], options["threads"], options["graceful_timeout"]) == (3, 4, 7)
    assert options["keepalive"] == 75  # above clients' poll intervals (see the option)
    assert options["preload_app"] is False
    assert options["control_socket_disable"] is True


def test_ipv6_bind_host_is_bracketed() -> None:
    assert api.gunicorn_options(_conf(bind_host="::1", bind_port=8774))["bind"] == ["[::1]:8774"]


def test_every_option_is_known_to_gunicorn() -> None:
    app = api.GunicornApplication(_conf())  # loads the settings; serves nothing until run()
    assert app.cfg.worker_class is api_worker.DeadlineThreadWorker
    assert app.cfg.bind == ["0.0.0.0:8774"]
