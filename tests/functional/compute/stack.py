"""A conductor and one disk-driver compute in one process (``fake://``, SQLite, local images)."""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import uuid
from typing import Any

from fleetcache.cmd import compute as compute_cmd
from fleetcache.cmd import conductor as conductor_cmd
from fleetcache.common import rpc
from fleetcache.common.context import RequestContext
from fleetcache.common.db import services as db_services
from fleetcache.common.db.migration import db_sync
from fleetcache.common.db.session import Database
from fleetcache.compute import rpcapi
from fleetcache.compute.imagecache import cache_name
from fleetcache.compute.manager import ComputeManager
from fleetcache.demo import make_conf
from fleetcache.image import local
from tests.stored_reports import StoredReport, stored_report
from tests.waiting import wait_for

CTXT = RequestContext(request_id="req-functional")


class Stack:
    def __init__(self, tmp_path: pathlib.Path, **compute_overrides: Any) -> None:
        self.tmp_path = tmp_path
        self.workdir = str(tmp_path)
        tag = uuid.uuid4().hex[:6]  # fake:// queues outlive a test: never reuse a name
        self.conf = make_conf(self.workdir, f"conductor-{tag}")
        self.db = Database.from_conf(self.conf)
        db_sync(self.db)
        self.transports = rpc.Transports(self.conf)
        self.conductor, self.state = conductor_cmd.build_service(self.conf, self.db,
                                                                 self.transports)
        self.conductor.start()
        self.host = f"compute-{tag}"
        self.compute_conf = make_conf(self.workdir, self.host, compute_driver="disk",
                                      **compute_overrides)
        self.compute_transports = rpc.Transports(self.compute_conf)
        self.compute = compute_cmd.build_service(self.compute_conf, self.compute_transports)
        self.compute.start()
        wait_for(lambda: any(s["host"] == self.host for s in db_services.service_list(self.db)),
                 "the compute to register")
        self.api = rpcapi.ComputeAPI(self.conf, self.transports.get())
        self.images_dir = self.conf.image_source.local_directory

    @property
    def manager(self) -> ComputeManager:
        endpoint: ComputeManager = self.compute.servers["compute"].dispatcher.endpoints[0]
        return endpoint

    def add_raw(self, size: int = 1024 * 1024) -> str:
        data = os.urandom(64 * 1024) * (size // (64 * 1024))
        return local.add_image(self.images_dir, io.BytesIO(data), disk_format="raw").id

    def add_qcow2(self, virtual: str = "16M") -> str:
        path = self.tmp_path / f"src-{uuid.uuid4().hex[:6]}.qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(path), virtual],
                       check=True)
        return local.add_image(self.images_dir, str(path), disk_format="qcow2").id

    def base(self, image_id: str) -> pathlib.Path:
        return pathlib.Path(self.compute_conf.instances_path) / "_base" / cache_name(image_id)

    def reported(self) -> StoredReport | None:
        return stored_report(self.db, self.host)

    def reported_ids(self) -> set[str]:
        cache = self.reported()
        return {i["image_id"] for i in cache["images"]} if cache else set()

    def stop(self) -> None:
        self.compute.stop()
        self.conductor.stop()
        self.state.shutdown()
        self.compute_transports.cleanup()
        self.transports.cleanup()
        self.db.dispose()
