"""Review finding in fleetcache.conductor.scheduler.destinations: a rebuild is checked with
``force_host`` = the instance's host and ``claim=False``, and ``Scheduler.candidates`` skips
every host filter whenever ``force_host`` is set (Nova's ``force_hosts``, meant for the
admin's ``zone:host``). So a rebuild with a new image is never checked by the host filters
(AggregateImagePropertiesIsolation, AggregateInstanceExtraSpecsFilter, ComputeFilter...),
although ``InstanceBuilder.rebuild`` says the scheduler "checks the host again for the image".
Nova had the same hole (bug 1664931, OSSA-2017-006): rebuild now goes through the filters
with ``requested_destination``, not ``force_hosts``."""

from __future__ import annotations

import pytest
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.common.db.session import Database
from fleetcache.conductor.placement import PlacementClient
from fleetcache.conductor.scheduler import Scheduler
from tests.functional.conductor.test_scheduler import (  # noqa: F401 - the fixtures
    CTXT,
    Cloud,
    cloud,
    db,
    enable,
    placed,
    request,
)


def test_a_rebuild_with_an_image_the_hosts_aggregate_isolates_out_is_refused(
    placement_conf: cfg.ConfigOpts, db: Database, cloud: Cloud,  # noqa: F811
    placement_client: PlacementClient,
) -> None:
    enable(placement_conf, "ComputeFilter", "AggregateImagePropertiesIsolation")
    host = cloud.compute("compute-ee")
    cloud.aggregate([host], {"tesora_edition": "ee"})
    scheduler = Scheduler(placement_conf, db, placement_client)
    other_edition = {"disk_format": "raw", "tesora_edition": "ce"}
    # A build of that image is kept off the host ...
    with pytest.raises(exception.NoValidHost):
        placed(scheduler, request(other_edition))
    # ... and so must be a rebuild of an instance there onto it (build.py's rebuild check).
    with pytest.raises(exception.NoValidHost):
        placed(scheduler, request(other_edition, force_host=host, claim=False))
