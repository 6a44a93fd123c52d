"""A Keystone that resets a pooled connection (a keep-alive server closing it as the request
goes out) costs a quota check a retry, not a 503: ``[oslo_limit] connect_retries`` defaults
to :data:`~fleetcache.common.service_auth.CONNECT_RETRIES`.

The real oslo.limit reads the limits from a real HTTP server here. It keeps its Keystone
connection process-wide once made, so each check runs in a process of its own.
"""

from __future__ import annotations

import subprocess
import sys

from fleetcache.common import service_auth
from tests.resetting_server import ResettingServer

#: A check as the API makes it (``[quota] driver = unified_limits``): the limits' endpoint by
#: id, the service user's token from the admin_token plugin, Keystone at argv[1];
#: ``connect_retries`` from argv[2] when given. Prints the registered metadata limit.
CHECK = """
import sys
from oslo_config import cfg
from fleetcache.api.quota import limit_conf
from fleetcache.api.quota.unified import UnifiedLimitsCheck
from fleetcache.common import exception
conf = cfg.ConfigOpts()
conf([], default_config_files=[], default_config_dirs=[])
limit_conf.register_opts(conf)
conf.set_override("auth_type", "admin_token", group="oslo_limit")
limit_conf.apply(conf)
for name, value in (("endpoint", sys.argv[1] + "/v3"), ("token", "service-token"),
                    ("endpoint_id", "compute-endpoint")):
    conf.set_override(name, value, group="oslo_limit")
if len(sys.argv) > 2:
    conf.set_override("connect_retries", int(sys.argv[2]), group="oslo_limit")
limit_conf.apply(conf)
try:
    print(UnifiedLimitsCheck(None, "project").metadata_items_limit())
except exception.LimitsUnavailable as exc:
    print(exc.code, exc)
"""


def _keystone(url: str) -> dict[str, object]:
    """The answers of Keystone's identity v3 that reading a registered limit takes."""
    return {
        "/v3": {"version": {"id": "v3.14", "status": "stable",
                            "links": [{"rel": "self", "href": url + "/v3/"}]}},
        "/v3/limits/model": {"model": {"name": "flat", "description": "flat"}},
        "/v3/endpoints/compute-endpoint": {"endpoint": {
            "id": "compute-endpoint", "service_id": "compute-service", "region_id": "RegionOne",
            "interface": "public", "url": "http://compute.example", "enabled": True}},
        "/v3/registered_limits": {"registered_limits": [{
            "id": "limit-1", "service_id": "compute-service", "region_id": "RegionOne",
            "resource_name": "server_metadata_items", "default_limit": 128}],
            "links": {"self": url + "/v3/registered_limits", "next": None, "previous": None}},
    }


def _check(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", CHECK, *args], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_reset_connection_is_retried_by_default() -> None:
    with ResettingServer({}, resets=1) as keystone:
        keystone.routes.update(_keystone(keystone.url))
        assert _check(keystone.url) == "128"
    # The reset request, sent again, then the rest of the read.
    assert keystone.paths[:2] == ["/v3/limits/model", "/v3/limits/model"]
    assert keystone.paths[-1] == "/v3/registered_limits"


def test_without_retries_a_reset_is_a_503_naming_it() -> None:
    with ResettingServer({}, resets=1) as keystone:
        keystone.routes.update(_keystone(keystone.url))
        answer = _check(keystone.url, "0")
    assert answer.startswith("503 The quota limits could not be read from Keystone: "
                             "ConnectFailure"), answer
    assert "Connection reset by peer" in answer
    assert keystone.paths == ["/v3/limits/model"]


def test_retries_end_in_a_503_when_every_attempt_is_reset() -> None:
    with ResettingServer({}, resets=service_auth.CONNECT_RETRIES + 1) as keystone:
        keystone.routes.update(_keystone(keystone.url))
        answer = _check(keystone.url)
    assert answer.startswith("503 "), answer
    assert keystone.paths == ["/v3/limits/model"] * (service_auth.CONNECT_RETRIES + 1)
