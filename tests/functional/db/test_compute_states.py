"""The pre-cache job's narrow lookup of its hosts' compute services, on every backend."""

from __future__ import annotations

import datetime

import pytest

from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import services as db_services
from fleetcache.common.db.compute_states import compute_states, peer_sites
from fleetcache.common.db.session import Database
from fleetcache.common.servicegroup import service_is_up

pytestmark = pytest.mark.db
COMPUTE = "fleetcache-compute"
CONDUCTOR = "fleetcache-conductor"


def test_states_carry_cell_flags_and_heartbeat(db: Database) -> None:
    cell = db_cells.cell_create(db, "cell1", "rabbit://h/1")
    c1 = db_services.service_register(db, "c1", COMPUTE, "compute", cell["id"])
    c2 = db_services.service_register(db, "c2", COMPUTE, "compute", cell["id"])
    db_services.service_register(db, "c3", COMPUTE, "compute", None)
    db_services.service_update(db, c1["id"], disabled=True, disabled_reason="maintenance")
    db_services.service_update(db, c2["id"], forced_down=True)

    states = compute_states(db, ["c1", "c2", "c3", "gone"])

    assert sorted(states) == ["c1", "c2", "c3"]  # no service: absent
    assert states["c1"]["cell"] == cell and states["c2"]["cell"] == cell
    assert states["c3"]["cell"] is None
    assert [states[h]["disabled"] for h in ("c1", "c2", "c3")] == [True, False, False]
    assert [states[h]["forced_down"] for h in ("c1", "c2", "c3")] == [False, True, False]
    seen = states["c1"]["last_seen_up"]
    assert isinstance(seen, datetime.datetime) and seen == c1["last_seen_up"]
    assert service_is_up(states["c1"], 60) and not service_is_up(states["c2"], 60)


def test_hosts_of_a_cell_share_one_cell_dict_and_cells_stay_apart(db: Database) -> None:
    one = db_cells.cell_create(db, "cell1", "rabbit://h/1")
    two = db_cells.cell_create(db, "cell2", "rabbit://h/2")
    for n in range(4):
        db_services.service_register(db, f"c{n}", COMPUTE, "compute", (one, two)[n % 2]["id"])

    states = compute_states(db, [f"c{n}" for n in range(4)])

    assert states["c0"]["cell"] is states["c2"]["cell"]
    assert [states[f"c{n}"]["cell"] for n in range(4)] == [one, two, one, two]


def test_only_services_of_the_binary_asked_for(db: Database) -> None:
    db_services.service_register(db, "both", CONDUCTOR, "conductor", None)
    db_services.service_register(db, "conductor-only", CONDUCTOR, "conductor", None)
    db_services.service_register(db, "both", COMPUTE, "compute", None)

    assert sorted(compute_states(db, ["both", "conductor-only"])) == ["both"]
    assert sorted(compute_states(db, ["both", "conductor-only"], CONDUCTOR)) == [
        "both", "conductor-only"]
    assert compute_states(db, []) == {}


def test_pages_of_any_size_take_few_statement_texts(db: Database, sql_texts: list[str]) -> None:
    """A job looks its hosts up 500 at a time, then the rest: one text per size filled
    SQLite's statement cache with statements of up to 500 parameters."""
    for n in range(40):
        db_services.service_register(db, f"c{n:02d}", COMPUTE, "compute", None)
    hosts = [f"c{n:02d}" for n in range(40)]
    sql_texts.clear()

    for size in range(1, 41):
        assert sorted(compute_states(db, hosts[:size])) == hosts[:size]

    lookups = {t for t in sql_texts if "services.host IN" in t}
    assert len(lookups) <= 7  # 1, 2, 4, ..., 64 hosts


def test_peer_sites_are_the_hosts_that_report_an_image_server(db: Database) -> None:
    cell = db_cells.cell_create(db, "cell1", "rabbit://h/1")
    db_services.service_register(db, "c1", COMPUTE, "compute", cell["id"], {
        "peer": {"url": "http://10.0.0.1:8790", "group": ""}}, host_ip="10.0.0.1")
    db_services.service_register(db, "c2", COMPUTE, "compute", cell["id"], {
        "peer": {"url": "http://10.0.0.2:8790", "group": "rack7", "not_cached_header": True}},
        host_ip="10.0.0.2")
    db_services.service_register(db, "c3", COMPUTE, "compute", None, {
        "peer": {"url": "http://10.0.0.3:8790", "group": ""}})
    db_services.service_register(db, "c4", COMPUTE, "compute", cell["id"], {})
    db_services.service_register(db, "c6", COMPUTE, "compute", cell["id"], {"peer": {
        "url": "http://172.16.0.6:8790", "group": "", "address": "172.16.0.6"}},
        host_ip="10.0.0.6")
    db_services.service_register(db, "c5", COMPUTE, "compute", cell["id"], {"peer": "junk"})

    sites = peer_sites(db, ["c1", "c2", "c3", "c4", "c5", "c6", "gone"])

    assert sites == {
        "c1": {"url": "http://10.0.0.1:8790", "group": "cell1", "address": "10.0.0.1"},
        "c2": {"url": "http://10.0.0.2:8790", "group": "cell1/rack7", "address": "10.0.0.2",
               "not_cached_header": True},  # it marks its not-cached 404s
        "c3": {"url": "http://10.0.0.3:8790", "group": "-", "address": None},
        # its image server's network, where its own requests to peers come from
        "c6": {"url": "http://172.16.0.6:8790", "group": "cell1", "address": "172.16.0.6"},
    }
