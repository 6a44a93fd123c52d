"""The ``openstack`` client's entry into fleetcache (``openstack.cli.extension``): the API
name, version option and ``make_client``, as osc-lib's plugin interface asks."""

from __future__ import annotations

import argparse
from typing import Any

from fleetcache.client.api_client import MICROVERSION, ApiClient

API_NAME = "fleetcache"
API_VERSION_OPTION = "os_fleetcache_api_version"
#: One command set; the compute API's microversion is ApiClient's (2.81).
API_VERSIONS = {"1": "fleetcache.client.api_client.ApiClient"}
DEFAULT_API_VERSION = "1"


def make_client(instance: Any) -> ApiClient:
    """An :class:`ApiClient` on the ``openstack`` client's keystoneauth session: its token
    (renewed by the session) and the catalog's compute endpoint for the chosen region and
    interface."""
    endpoint = instance.get_endpoint_for_service_type(
        "compute", region_name=instance.region_name, interface=instance.interface)
    session = instance.session
    return ApiClient(endpoint, timeout=float(getattr(instance, "timeout", None) or 60.0),
                     token_source=session.get_token)


def build_option_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument(
        "--os-fleetcache-api-version", metavar="<version>", default=DEFAULT_API_VERSION,
        help=f"fleetcache command set version (default: {DEFAULT_API_VERSION}; the compute "
        f"API is used at microversion {MICROVERSION})")
    return parser
