"""The unmodified ``openstack`` client against the real stack, checked against its database.

The client authenticates to the stack's Keystone with a password (``.stack/env``) and finds
``fleetcache-api`` (compute) and Glance (image) in the catalog. What the API says
is compared with what ``fleetcache.common.db.aggregates`` reads from the stack's database.
"""

from __future__ import annotations

from typing import Any

import pytest

from fleetcache.common import exception
from fleetcache.common.db import aggregates as db_aggregates

pytestmark = pytest.mark.integration


def _row(listing: list[dict[str, Any]], name: str) -> dict[str, Any]:
    rows = [r for r in listing if r["Name"] == name]
    assert len(rows) == 1, listing
    return rows[0]


def test_aggregate_create_set_show_list_delete_agree_with_database(stack, aggregate_name):
    created = stack.openstack_json("aggregate", "create", "--zone", "az-it", aggregate_name)
    agg_id = created["id"]
    try:
        in_db = db_aggregates.aggregate_get(stack.db, agg_id)
        assert (in_db["name"], in_db["availability_zone"]) == (aggregate_name, "az-it")

        stack.run_openstack("aggregate", "set", "--property", "trove=true",
                            "--property", "os_distro=ubuntu", aggregate_name)
        in_db = db_aggregates.aggregate_get(stack.db, agg_id)
        assert in_db["metadata"]["trove"] == "true"
        assert in_db["metadata"]["os_distro"] == "ubuntu"

        shown = stack.openstack_json("aggregate", "show", aggregate_name)
        assert shown["id"] == agg_id
        assert shown["availability_zone"] == "az-it"
        assert shown["properties"] == {"trove": "true", "os_distro": "ubuntu"}
        assert shown["uuid"] == in_db["uuid"]

        row = _row(stack.openstack_json("aggregate", "list", "--long"), aggregate_name)
        assert row["ID"] == agg_id
        assert row["UUID"] == in_db["uuid"]
        assert row["Availability Zone"] == "az-it"
        assert row["Properties"] == {"trove": "true", "os_distro": "ubuntu"}
    finally:
        stack.run_openstack("aggregate", "delete", aggregate_name)
    with pytest.raises(exception.AggregateNotFound):
        db_aggregates.aggregate_get(stack.db, agg_id)
    names = [r["Name"] for r in stack.openstack_json("aggregate", "list")]
    assert aggregate_name not in names


def test_aggregate_add_and_remove_host_agree_with_database(stack, aggregate_name):
    agg_id = stack.openstack_json("aggregate", "create", aggregate_name)["id"]
    try:
        shown = stack.openstack_json("aggregate", "add", "host", aggregate_name, "compute1")
        assert shown["hosts"] == ["compute1"]
        shown = stack.openstack_json("aggregate", "add", "host", aggregate_name, "compute3")
        assert sorted(shown["hosts"]) == ["compute1", "compute3"]
        in_db = db_aggregates.aggregate_get(stack.db, agg_id)
        assert sorted(in_db["hosts"]) == ["compute1", "compute3"]

        row = _row(stack.openstack_json("aggregate", "list", "--long"), aggregate_name)
        assert sorted(row["Hosts"]) == ["compute1", "compute3"]

        shown = stack.openstack_json("aggregate", "remove", "host", aggregate_name, "compute1")
        assert shown["hosts"] == ["compute3"]
        assert db_aggregates.aggregate_get(stack.db, agg_id)["hosts"] == ["compute3"]
    finally:
        stack.purge_aggregate(agg_id)


def test_add_host_of_unknown_compute_fails_and_leaves_database_unchanged(stack, aggregate_name):
    agg_id = stack.openstack_json("aggregate", "create", aggregate_name)["id"]
    try:
        proc = stack.run_openstack("aggregate", "add", "host", aggregate_name, "no-such-host",
                                   check=False)
        assert proc.returncode != 0
        assert "no-such-host" in proc.stderr
        assert db_aggregates.aggregate_get(stack.db, agg_id)["hosts"] == []
    finally:
        stack.purge_aggregate(agg_id)


def test_member_role_gets_403_and_creates_nothing(stack, aggregate_name):
    resp = stack.api_request("POST", "os-aggregates", user="member",
                             json={"aggregate": {"name": aggregate_name}})
    assert resp.status_code == 403, resp.text
    assert resp.json()["forbidden"]["code"] == 403
    assert resp.headers["X-Compute-Request-Id"].startswith("req-")
    assert aggregate_name not in [a["name"] for a in db_aggregates.aggregate_list(stack.db)]


def test_member_role_gets_403_on_host_changes(stack, make_aggregate):
    agg = make_aggregate()
    resp = stack.api_request("POST", f"os-aggregates/{agg['id']}/action", user="member",
                             json={"add_host": {"host": "compute1"}})
    assert resp.status_code == 403, resp.text
    assert db_aggregates.aggregate_get(stack.db, agg["id"])["hosts"] == []


def test_unknown_aggregate_gets_404(stack):
    unknown = max([a["id"] for a in db_aggregates.aggregate_list(stack.db)], default=0) + 1000
    resp = stack.api_request("GET", f"os-aggregates/{unknown}")
    assert resp.status_code == 404, resp.text
    assert str(unknown) in resp.json()["itemNotFound"]["message"]
    assert resp.headers["X-Compute-Request-Id"].startswith("req-")

    proc = stack.run_openstack("aggregate", "show", str(unknown), check=False)
    assert proc.returncode != 0
    assert "No Aggregate found" in proc.stderr


@pytest.mark.parametrize("body", [
    b'{"aggregate": {"nam": "x"}}',              # schema: name is required
    b'{"aggregate": {"name": ""}}',              # schema: empty name
    b'{"aggregate": ',                            # not JSON
], ids=["missing-name", "empty-name", "not-json"])
def test_malformed_create_body_gets_400_with_message(stack, body):
    before = len(db_aggregates.aggregate_list(stack.db))
    resp = stack.api_request("POST", "os-aggregates", data=body,
                             headers={"Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    fault = resp.json()["badRequest"]
    assert fault["code"] == 400
    assert fault["message"].strip()
    assert len(db_aggregates.aggregate_list(stack.db)) == before


def test_image_list_reaches_the_stack_glance(stack):
    images = {i["ID"]: i for i in stack.openstack_json("image", "list")}
    for image_id in stack.sample_images:
        assert images[image_id]["Status"] == "active"
    shown = stack.openstack_json("image", "show", stack.sample_images[0])
    assert shown["disk_format"] == "qcow2"
    assert shown["properties"]["direct_url"].startswith("file://")


def test_compute_service_list_shows_every_compute_up_as_nova_compute(stack):
    services = stack.openstack_json("compute", "service", "list", "--service", "nova-compute")
    assert {s["Host"]: s["State"] for s in services} == {h: "up" for h in stack.computes}
    assert {s["Binary"] for s in services} == {"nova-compute"}
    # fleetcache's own name finds the same services.
    ours = stack.openstack_json("compute", "service", "list", "--service", "fleetcache-compute")
    assert sorted(s["Host"] for s in ours) == sorted(stack.computes)
