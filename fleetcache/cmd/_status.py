"""``fleetcache-manage status``: upgrade checks (oslo.upgradecheck), run before switching on
what depends on every compute being in Placement.

* Placement: ``[placement]`` is configured and answers.
* Image-type traits: every up compute has reported its ``supports_image_type_*``
  capabilities and the conductor has written them to Placement as ``COMPUTE_IMAGE_TYPE_*``
  traits. Until then a scheduler that requires the trait of an image's format would find no
  such host: a compute from before image-type reporting, or one Placement has not heard of yet,
  would silently drop out (the upgrade hazard of Nova's image-type request filter, which its
  release note answers with "do not enable until every compute is upgraded").
* Scheduler filters: ``[filter_scheduler]`` names only filters and weighers that load (the
  conductor would refuse to start otherwise).
"""

from __future__ import annotations

from oslo_config import cfg
from oslo_upgradecheck import upgradecheck

from fleetcache.common import binaries, exception, servicegroup
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.conductor.placement import PlacementClient
from fleetcache.conductor.placement.provider import has_image_type_report
from fleetcache.conductor.scheduler.filters import load_filters
from fleetcache.conductor.scheduler.weighers import load_weighers


class Checks(upgradecheck.UpgradeCommands):
    display_title = "fleetcache upgrade check results"

    def __init__(self, conf: cfg.ConfigOpts, db: Database) -> None:
        self.conf = conf
        self.db = db

    def _check_placement(self) -> upgradecheck.Result:
        try:
            client = PlacementClient.from_conf(self.conf)
        except exception.InvalidConfiguration as exc:
            return upgradecheck.Result(upgradecheck.Code.FAILURE, str(exc))
        if client is None:
            return upgradecheck.Result(
                upgradecheck.Code.FAILURE,
                "[placement] auth_type is not set: the conductor reports no compute to "
                "Placement, so none is schedulable.")
        try:
            client.list_providers(name="fleetcache-status-probe")
        except exception.PlacementError as exc:
            return upgradecheck.Result(upgradecheck.Code.FAILURE, str(exc))
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    def _check_image_type_traits(self) -> upgradecheck.Result:
        missing = []
        for svc in db_services.service_list(self.db, binary=binaries.COMPUTE):
            if not servicegroup.service_is_up(svc, self.conf.service_down_time):
                continue
            if not has_image_type_report(svc["capabilities"]):
                missing.append(f"{svc['host']} (reports no image types)")
            elif svc["placement_synced_at"] is None:
                missing.append(f"{svc['host']} (not yet in Placement)")
        if missing:
            return upgradecheck.Result(
                upgradecheck.Code.WARNING,
                f"{len(missing)} up compute(s) have no COMPUTE_IMAGE_TYPE_* traits in "
                f"Placement: {', '.join(missing)}. Scheduling that requires an image's "
                "type trait would skip them: upgrade them and check that the conductor "
                "reaches Placement first.")
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    def _check_scheduler_filters(self) -> upgradecheck.Result:
        try:
            load_filters(self.conf)
            load_weighers(self.conf, self.db)
        except exception.InvalidConfiguration as exc:
            return upgradecheck.Result(upgradecheck.Code.FAILURE, str(exc))
        return upgradecheck.Result(upgradecheck.Code.SUCCESS)

    _upgrade_checks = (
        ("Placement", _check_placement),
        ("Image-type traits", _check_image_type_traits),
        ("Scheduler filters", _check_scheduler_filters),
    )
