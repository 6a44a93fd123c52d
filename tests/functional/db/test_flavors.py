"""Flavor queries (fleetcache.common.db.flavors) on every database backend."""

from __future__ import annotations

import pytest

from fleetcache.common import exception
from fleetcache.common.db import flavors
from fleetcache.common.db.session import Database

pytestmark = pytest.mark.db


def test_create_get_list_delete(db: Database) -> None:
    created = flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f1", description="d")
    assert created["flavorid"] == "f1" and created["is_public"] is True
    assert flavors.flavor_get(db, "f1") == created
    generated = flavors.flavor_create(db, "m2", 2, 1024, 0, is_public=False)
    assert len(generated["flavorid"]) == 36
    assert [f["name"] for f in flavors.flavor_list(db)] == ["m1", "m2"]
    assert [f["name"] for f in flavors.flavor_list(db, is_public=False)] == ["m2"]
    flavors.flavor_delete(db, "f1")
    with pytest.raises(exception.FlavorNotFound):
        flavors.flavor_get(db, "f1")
    with pytest.raises(exception.FlavorNotFound):
        flavors.flavor_delete(db, "f1")


def test_names_and_ids_are_unique(db: Database) -> None:
    flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f1")
    with pytest.raises(exception.FlavorExists):
        flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f2")
    with pytest.raises(exception.FlavorIdExists):
        flavors.flavor_create(db, "m2", 1, 512, 1, flavorid="f1")


def test_extra_specs(db: Database) -> None:
    flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f1")
    assert flavors.extra_specs_update(db, "f1", {"a": "1", "b": "2"}) == {"a": "1", "b": "2"}
    assert flavors.extra_specs_update(db, "f1", {"a": "3"}) == {"a": "3", "b": "2"}
    flavors.extra_spec_delete(db, "f1", "b")
    assert flavors.flavor_get(db, "f1")["extra_specs"] == {"a": "3"}
    with pytest.raises(exception.FlavorExtraSpecNotFound):
        flavors.extra_spec_delete(db, "f1", "b")
    assert flavors.flavor_update_description(db, "f1", "new")["description"] == "new"
    flavors.flavor_delete(db, "f1")  # its specs go with it


def test_access_add_list_remove(db: Database) -> None:
    flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f1", is_public=False)
    assert flavors.flavor_projects(db, "f1") == []
    assert flavors.flavor_access_add(db, "f1", "p1") == ["p1"]
    assert flavors.flavor_access_add(db, "f1", "p2") == ["p1", "p2"]
    with pytest.raises(exception.FlavorAccessExists):
        flavors.flavor_access_add(db, "f1", "p1")
    assert flavors.flavor_access_remove(db, "f1", "p1") == ["p2"]
    with pytest.raises(exception.FlavorAccessNotFound):
        flavors.flavor_access_remove(db, "f1", "p1")
    for call in (flavors.flavor_projects, flavors.flavor_access_add,
                 flavors.flavor_access_remove):
        with pytest.raises(exception.FlavorNotFound):
            call(db, "nope", *(["p1"] if call is not flavors.flavor_projects else []))
    flavors.flavor_delete(db, "f1")  # its access list goes with it
    flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f1", is_public=False)
    assert flavors.flavor_projects(db, "f1") == []


def test_list_adds_the_projects_private_flavors_to_the_public_ones(db: Database) -> None:
    flavors.flavor_create(db, "pub", 1, 512, 1, flavorid="pub")
    flavors.flavor_create(db, "a", 1, 512, 1, flavorid="a", is_public=False)
    flavors.flavor_create(db, "b", 1, 512, 1, flavorid="b", is_public=False)
    flavors.flavor_access_add(db, "a", "p1")
    flavors.flavor_access_add(db, "b", "p2")

    def names(**kw: object) -> list[str]:
        return [f["flavorid"] for f in flavors.flavor_list(db, **kw)]  # type: ignore[arg-type]

    assert names(is_public=True) == ["pub"]
    assert names(is_public=True, project_id="p1") == ["pub", "a"]
    assert names(is_public=True, project_id="p3") == ["pub"]
    assert names(is_public=False, project_id="p1") == ["a", "b"]
    assert names(project_id="p1") == ["pub", "a", "b"]


def test_rxtx_factor_is_kept(db: Database) -> None:
    assert flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f1")["rxtx_factor"] == 1.0
    flavors.flavor_create(db, "m2", 1, 512, 1, flavorid="f2", rxtx_factor=2.5)
    assert flavors.flavor_get(db, "f2")["rxtx_factor"] == 2.5
