"""schemathesis against the served ``/openapi.json``, on the in-process WSGI application.

Every operation of the document gets generated requests, valid ones and (for the bodies)
invalid ones; a 5xx, a response that does not match its documented schema, status, media type
or headers fails the run. A fixture creates what the deeper routes need (compute hosts, three
aggregates with hosts and metadata, a pre-cache job) and the hooks steer part of the generated
ids and host names to them, so that the handlers past the 404 are reached too.

The run is bounded (``MAX_EXAMPLES`` per operation and a deadline per example) so that it stays
within ``make test``'s budget; the requests that found each bug are kept as explicit tests in
``test_hostile_requests.py`` (hypothesis' database is off: the run is the same everywhere).
"""

from __future__ import annotations

import io
import pathlib
import zlib
from collections.abc import Iterator
from typing import Any

import hypothesis
import pytest
import schemathesis
import webtest
from oslo_config import cfg
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from fleetcache.api import routes, wsgi
from fleetcache.common import config
from fleetcache.common.db import migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.image import local
from tests.functional.api.helpers import StubComputeAPI, StubConductorAPI
from tests.functional.api.keystone_limits import REGISTERED, keystone_limits, use_unified_limits

MAX_EXAMPLES = 150
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, response_headers_conformance]
HOSTS = ["c1", "c2", "c3"]
#: Requests sent per operation (``pytest -s`` shows the total).
REQUESTS: dict[str, int] = {}


def _pick(value: object, among: int) -> int:
    """A stable choice from a generated value (``hash`` changes with every process)."""
    return zlib.crc32(repr(value).encode("utf-8", "backslashreplace")) % among


class World:
    """What the fuzzed application holds: aggregate ids and their jobs, flavors (with an
    extra spec), an image and servers."""

    def __init__(self, app: Any, db: Database) -> None:
        self.app = app
        self.db = db
        self.aggregate_ids: list[int] = []
        self.job_ids: list[str] = []
        self.flavor_ids: list[str] = []
        self.server_ids: list[str] = []
        self.image_id = ""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    path: pathlib.Path = tmp_path_factory.mktemp("fuzz")
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[])
    conf.set_override("connection", f"sqlite:///{path}/api.sqlite", group="database")
    conf.set_override("auth_strategy", "noauth", group="api")
    conf.set_override("backend", "local", group="image_source")
    conf.set_override("local_directory", str(path / "images"), group="image_source")
    # Quotas as on the stack: unified limits (Keystone answered by oslo.limit's fixture).
    use_unified_limits(conf)
    with keystone_limits(REGISTERED):
        db = Database.from_conf(conf)
        migration.db_sync(db)
        conductor = StubConductorAPI(db)
        conductor.settle = HOSTS[0]
        application = wsgi.init_application(conf, conductor_api=conductor,
                                            compute_api=StubComputeAPI())
        state = World(application, db)
        for host in HOSTS:
            db_services.service_register(db, host, "fleetcache-compute", "compute", None)
        client = webtest.TestApp(application)
        for number in range(3):
            aggregate = client.post_json(
                "/v2.1/os-aggregates", {"aggregate": {"name": f"fuzz{number}",
                                                      "availability_zone": f"az{number}"}}
            ).json["aggregate"]
            state.aggregate_ids.append(aggregate["id"])
            client.post_json(f"/v2.1/os-aggregates/{aggregate['id']}/action",
                             {"add_host": {"host": HOSTS[number]}})
            client.post_json(f"/v2.1/os-aggregates/{aggregate['id']}/action",
                             {"set_metadata": {"metadata": {"ssd": "true"}}})
            queued = client.post_json(
                f"/v2.1/os-aggregates/{aggregate['id']}/images",
                {"cache": [{"id": "0b0b0b0b-0000-4000-8000-000000000001"}]},
                headers={"OpenStack-API-Version": "compute 2.81"}, status=202,
            )
            state.job_ids.append(queued.headers["Location"].rsplit("/", 1)[-1])
        _add_flavors_and_servers(client, state, path)
        yield state
        db.dispose()


def _add_flavors_and_servers(client: webtest.TestApp, state: World, path: pathlib.Path) -> None:
    state.image_id = local.add_image(str(path / "images"), io.BytesIO(b"x" * 16),
                                     name="fuzz").id
    for number in range(2):
        flavor = client.post_json("/v2.1/flavors", {"flavor": {
            "name": f"fuzz{number}", "id": f"f{number}", "ram": 64, "vcpus": 1, "disk": 1}}
        ).json["flavor"]
        state.flavor_ids.append(flavor["id"])
        client.post_json(f"/v2.1/flavors/{flavor['id']}/os-extra_specs",
                         {"extra_specs": {"hw:cpu_policy": "shared"}})
    for number in range(3):
        server = client.post_json("/v2.1/servers", {"server": {
            "name": f"fuzz{number}", "imageRef": state.image_id, "flavorRef": "f0",
            "networks": "none"}}, headers={"OpenStack-API-Version": "compute 2.81"},
            status=202).json["server"]
        state.server_ids.append(server["id"])


@pytest.fixture(scope="module")
def served_schema(world: World) -> Any:
    schema = schemathesis.openapi.from_wsgi("/openapi.json", world.app)

    @schema.hook
    def map_path_parameters(context: Any, path_parameters: Any) -> Any:
        # Two generated ids in three name an aggregate that exists (and its job).
        if not isinstance(path_parameters, dict):
            return path_parameters
        raw = str(path_parameters.get("aggregate_id", ""))
        if raw and _pick(raw, 3):
            index = _pick(raw, len(world.aggregate_ids))
            path_parameters["aggregate_id"] = str(world.aggregate_ids[index])
            if "job_id" in path_parameters and _pick(raw, 2):
                path_parameters["job_id"] = world.job_ids[index]
        for key, known in (("flavor_id", world.flavor_ids), ("server_id", world.server_ids)):
            raw = str(path_parameters.get(key, ""))
            if raw and _pick(raw, 3):
                path_parameters[key] = known[_pick(raw, len(known))]
        key = str(path_parameters.get("flavor_extra_spec_key", ""))
        if key and _pick(key, 2):
            path_parameters["flavor_extra_spec_key"] = "hw:cpu_policy"
        return path_parameters

    @schema.hook
    def map_body(context: Any, body: Any) -> Any:
        # add_host/remove_host of a real compute host half of the time.
        for action in ("add_host", "remove_host"):
            args = body.get(action) if isinstance(body, dict) else None
            if isinstance(args, dict) and isinstance(args.get("host"), str):
                if _pick(args["host"], 2):
                    args["host"] = HOSTS[_pick(args["host"], len(HOSTS))]
        # A server create or rebuild names the real image and flavor half of the time.
        for key in ("server", "rebuild"):
            args = body.get(key) if isinstance(body, dict) else None
            if isinstance(args, dict) and isinstance(args.get("imageRef"), str):
                if _pick(args["imageRef"], 2):
                    args["imageRef"] = world.image_id
                    if "flavorRef" in args:
                        args["flavorRef"] = world.flavor_ids[_pick(args["imageRef"], 2)]
            # Counts up to 1,000 are valid: keep the run's database small.
            for count in ("min_count", "max_count"):
                if isinstance(args, dict) and isinstance(args.get(count), int):
                    args[count] = min(args[count], 3)
        return body

    return schema


OPERATIONS = [(method, path) for path, targets in routes.ROUTE_DECLARATIONS.items()
              for method in targets]


@pytest.mark.parametrize("mode", list(GenerationMode))
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_no_operation_answers_5xx_or_off_its_document(
    served_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    operation = served_schema[path][method]

    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    def fuzz(case: Any) -> None:
        REQUESTS[case.operation.label] = REQUESTS.get(case.operation.label, 0) + 1
        case.call_and_validate(checks=CHECKS)

    fuzz()


def teardown_module() -> None:
    print(f"\nfuzz: {sum(REQUESTS.values())} requests over {len(REQUESTS)} operations")
