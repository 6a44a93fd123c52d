"""RPC API versions stay in sync: client cap, server target, history, and method names."""

from __future__ import annotations

import inspect
import re
from types import ModuleType

import pytest

from fleetcache.compute import rpcapi as compute_rpcapi
from fleetcache.compute.manager import ComputeManager
from fleetcache.conductor import rpcapi as conductor_rpcapi
from fleetcache.conductor.manager import ConductorManager

PAIRS = [
    pytest.param(compute_rpcapi, compute_rpcapi.ComputeAPI, ComputeManager, id="compute"),
    pytest.param(conductor_rpcapi, conductor_rpcapi.ConductorAPI, ConductorManager,
                 id="conductor"),
]


@pytest.mark.parametrize(("module", "client", "server"), PAIRS)
def test_server_target_is_the_client_version(module: ModuleType, client: type,
                                             server: type) -> None:
    assert server.target.version == module.RPC_API_VERSION  # type: ignore[attr-defined]


@pytest.mark.parametrize(("module", "client", "server"), PAIRS)
def test_history_ends_at_the_current_version(module: ModuleType, client: type,
                                             server: type) -> None:
    versions = re.findall(r"^\* (\d+\.\d+) - ", module.__doc__ or "", re.MULTILINE)
    assert versions[-1] == module.RPC_API_VERSION
    assert versions == sorted(versions, key=lambda v: tuple(map(int, v.split("."))))


@pytest.mark.parametrize(("module", "client", "server"), PAIRS)
def test_every_client_method_is_served(module: ModuleType, client: type, server: type) -> None:
    methods = {n for n, _ in inspect.getmembers(client, inspect.isfunction)
               if not n.startswith("_")}
    assert methods - {n for n, _ in inspect.getmembers(server, inspect.isfunction)} == set()


@pytest.mark.parametrize(("module", "client", "server"), PAIRS)
def test_client_never_asks_for_more_than_it_knows(module: ModuleType, client: type,
                                                  server: type) -> None:
    # The module, not only the class: a helper beside the client could pick versions too.
    # Its docstring history and the cap's own assignment are not requests.
    source = inspect.getsource(module).replace(module.__doc__ or "", "")
    source = re.sub(r"^RPC_API_VERSION = .*$", "", source, flags=re.MULTILINE)
    asked = set(re.findall(r"""["'](\d+\.\d+)["']""", source))
    known = tuple(map(int, module.RPC_API_VERSION.split(".")))
    assert all(tuple(map(int, v.split("."))) <= known for v in asked)
    assert module.RPC_API_VERSION in asked
