"""The conductor endpoint's ``report_image_cache`` (fleetcache.conductor.manager)."""

from __future__ import annotations

import pathlib

import oslo_messaging as messaging
import pytest

from fleetcache.common import exception, rpc
from fleetcache.common.context import get_admin_context
from fleetcache.common.db import migration
from fleetcache.common.db.session import Database
from fleetcache.conductor.manager import ConductorManager, ConductorState
from tests.stored_reports import stored_report
from tests.unit.image.fixtures import make_conf


def test_report_replaces_the_hosts_images(tmp_path: pathlib.Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/c.sqlite")
    migration.db_sync(db)
    conf = make_conf()
    rpc.register_opts(conf)
    conf.set_override("transport_url", "fake:///")
    transports = rpc.Transports(conf)
    state = ConductorState(conf, db, transports)
    manager = ConductorManager(state)
    ctxt = get_admin_context()
    manager.report_image_cache(ctxt, "h1", [{"image_id": "a", "size": 3, "last_used": 1.0}],
                               4096, reported_at=10.0)
    manager.report_image_cache(ctxt, "h1", [{"image_id": "b", "size": 5, "last_used": 2.0}],
                               8192)
    cache = stored_report(db, "h1")
    assert cache is not None
    assert (cache["usage_bytes"], [i["image_id"] for i in cache["images"]]) == (8192, ["b"])
    with pytest.raises(messaging.ExpectedException) as caught:
        manager.report_image_cache(ctxt, "h1", [{"image_id": "a"}], 1)  # type: ignore[typeddict-item]
    assert isinstance(caught.value.exc_info[1], exception.InvalidInput)
    state.shutdown(wait=True)
    transports.cleanup()
    db.dispose()
