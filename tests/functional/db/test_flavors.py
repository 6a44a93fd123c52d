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


def test_rxtx_factor_is_kept(db: Database) -> None:
    assert flavors.flavor_create(db, "m1", 1, 512, 1, flavorid="f1")["rxtx_factor"] == 1.0
    flavors.flavor_create(db, "m2", 1, 512, 1, flavorid="f2", rxtx_factor=2.5)
    assert flavors.flavor_get(db, "f2")["rxtx_factor"] == 2.5
