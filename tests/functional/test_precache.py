"""Pre-caching end to end in one process: the REST API, the conductor daemon and compute agents
(fake driver) on the ``fake://`` transport, SQLite, and a notification listener."""

from __future__ import annotations

import re
import threading
import time
import uuid
from typing import Any

import oslo_messaging as messaging
import pytest
import webtest

from fleetcache.api import wsgi
from fleetcache.cmd import compute as compute_cmd
from fleetcache.cmd import conductor as conductor_cmd
from fleetcache.common import rpc
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import jobs
from fleetcache.common.db import services as db_services
from fleetcache.common.db.migration import db_sync
from fleetcache.common.db.session import Database
from fleetcache.demo import make_conf
from fleetcache.image import local

HEADERS = {"OpenStack-API-Version": "compute 2.81", "X-Roles": "admin"}


class Notifications:
    """Captures every notification on topic ``notifications`` of the in-process transport."""

    def __init__(self, transports: rpc.Transports) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []
        self._lock = threading.Lock()
        transport = transports.notification()
        self.listener = messaging.get_notification_listener(
            transport, [messaging.Target(topic="notifications")], [self])

    def info(self, ctxt: Any, publisher_id: str, event_type: str, payload: Any,
             metadata: Any) -> None:
        with self._lock:
            self.seen.append((publisher_id, event_type, payload))

    def for_job(self, job_uuid: str, count: int, timeout: float = 10) -> list[tuple[str, dict]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                mine = [(e, p) for _, e, p in self.seen if p.get("job_uuid") == job_uuid]
            if len(mine) >= count:
                return mine
            time.sleep(0.05)
        raise AssertionError(f"{len(mine)} notifications for job {job_uuid}, wanted {count}")


class Stack:
    def __init__(self, tmp_path: Any) -> None:
        self.workdir = str(tmp_path)
        self.tag = uuid.uuid4().hex[:6]  # fake:// queues outlive a test: never reuse a name
        self.conf = make_conf(self.workdir, f"conductor-{self.tag}", **{
            "image_cache.precache_concurrency": 2,
            "oslo_messaging_notifications.driver": ["messaging"],
            "long_rpc_timeout": 3,
        })
        self.db = Database.from_conf(self.conf)
        db_sync(self.db)
        db_cells.cell_create(self.db, "cell1", "fake://")
        self.transports = [rpc.Transports(self.conf)]
        self.notifications = Notifications(self.transports[0])
        self.notifications.listener.start()
        self.services: list[Any] = []
        conductor, self.state = conductor_cmd.build_service(self.conf, self.db,
                                                            self.transports[0])
        conductor.start()
        self.services.append(conductor)
        self.computes: dict[str, Any] = {}
        self.app = webtest.TestApp(wsgi.init_application(self.conf))
        self.images = [local.add_image(self.conf.image_source.local_directory,
                                       _bytes_file(tmp_path, n), name=f"img{n}").id
                       for n in range(2)]

    def start_compute(self, name: str, **overrides: Any) -> str:
        host = f"{name}-{self.tag}"
        conf = make_conf(self.workdir, host, compute_driver="fake", **overrides)
        transports = rpc.Transports(conf)
        self.transports.append(transports)
        service = compute_cmd.build_service(conf, transports)
        service.start()
        self.services.append(service)
        self.computes[host] = service
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if any(s["host"] == host for s in db_services.service_list(self.db)):
                return host
            time.sleep(0.05)
        raise AssertionError(f"{host} did not register")

    def aggregate(self, hosts: list[str]) -> int:
        agg = self.app.post_json("/v2.1/os-aggregates", {"aggregate": {"name": "agg"}},
                                 headers=HEADERS).json["aggregate"]
        for host in hosts:
            self.app.post_json(f"/v2.1/os-aggregates/{agg['id']}/action",
                               {"add_host": {"host": host}}, headers=HEADERS)
        return int(agg["id"])

    def cache(self, agg_id: int, images: list[str], status: int = 202) -> Any:
        return self.app.post_json(f"/v2.1/os-aggregates/{agg_id}/images",
                                  {"cache": [{"id": i} for i in images]},
                                  headers=HEADERS, status=status)

    def wait_job(self, location: str, timeout: float = 30) -> dict[str, Any]:
        path = location.split("://", 1)[-1].split("/", 1)[-1]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.app.get("/" + path, headers=HEADERS).json["job"]
            if job["state"] in ("done", "failed"):
                return dict(job)
            time.sleep(0.1)
        raise AssertionError(f"job at {location} did not finish")

    def stop(self) -> None:
        threads = [threading.Thread(target=s.stop) for s in self.services]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.notifications.listener.stop()
        self.notifications.listener.wait()
        self.state.shutdown()
        for transports in self.transports:
            transports.cleanup()
        self.db.dispose()


def _bytes_file(tmp_path: Any, n: int) -> str:
    path = tmp_path / f"src{n}.raw"
    path.write_bytes(bytes([n + 1]) * 4096)
    return str(path)


@pytest.fixture
def stack(tmp_path: Any) -> Any:
    s = Stack(tmp_path)
    yield s
    s.stop()


def _states(job: dict[str, Any]) -> dict[str, dict[str, tuple[str, str | None]]]:
    return {h["host"]: {i["image_id"]: (i["state"], i["reason"]) for i in h["images"]}
            for h in job["hosts"]}


def test_post_runs_the_job_persists_results_and_notifies(stack):
    up = [stack.start_compute("up1"), stack.start_compute("up2")]
    down = stack.start_compute("down")
    db_services.service_update(
        stack.db, db_services.service_get(stack.db, down, "fleetcache-compute")["id"],
        forced_down=True)
    agg_id = stack.aggregate([*up, down])

    response = stack.cache(agg_id, stack.images)
    assert response.body == b""
    job = stack.wait_job(response.headers["Location"])

    assert job["state"] == "done" and job["total_hosts"] == 3 and job["hosts_reported"] == 3
    assert _states(job) == {
        **{h: {i: ("cached", None) for i in stack.images} for h in up},
        down: {i: ("skipped", "down") for i in stack.images},
    }
    assert job["counts"] == {"cached": 4, "existing": 0, "error": 0, "unsupported": 0,
                             "skipped": 2, "pending": 0, "waiting": 0}
    stored = jobs.job_get(stack.db, job["id"])
    assert stored["state"] == jobs.DONE and len(stored["results"]) == 6

    events = stack.notifications.for_job(job["id"], 5)
    names = [e for e, _ in events]
    assert names[0] == "aggregate.cache_images.start"
    assert names[-1] == "aggregate.cache_images.end"
    progress = [p for e, p in events if e == "aggregate.cache_images.progress"]
    assert sorted(p["index"] for p in progress) == [1, 2, 3]
    assert {p["total"] for p in progress} == {3}
    assert {p["host"]: p["images_failed"] for p in progress}[down] == stack.images
    publishers = {pub for pub, _, p in stack.notifications.seen if p.get("job_uuid") == job["id"]}
    assert publishers == {f"fleetcache-conductor:conductor-{stack.tag}"}

    again = stack.wait_job(stack.cache(agg_id, stack.images).headers["Location"])
    assert {s for h in up for s, _ in _states(again)[h].values()} == {"existing"}


def test_missing_image_is_400_and_leaves_no_job(stack):
    host = stack.start_compute("c1")
    agg_id = stack.aggregate([host])
    response = stack.cache(agg_id, [stack.images[0], str(uuid.uuid4())], status=400)
    assert "could not be found" in response.json["badRequest"]["message"]
    assert jobs.job_list(stack.db) == []
    assert stack.app.get(f"/v2.1/os-aggregates/{agg_id}/images/jobs",
                         headers=HEADERS).json["jobs"] == []


def test_failing_image_and_dead_compute_are_errors_with_reasons(stack):
    failing = stack.start_compute("failing", **{"fake_driver.fail_images": [stack.images[1]]})
    dead = stack.start_compute("dead")
    stack.computes[dead].stop()  # still "up" in the database: the call has nobody to answer
    agg_id = stack.aggregate([failing, dead])

    started = time.monotonic()
    job = stack.wait_job(stack.cache(agg_id, stack.images).headers["Location"])
    assert time.monotonic() - started < 15

    states = _states(job)
    assert states[failing][stack.images[0]] == ("cached", None)
    assert states[failing][stack.images[1]][0] == "error"
    assert "fail_images" in states[failing][stack.images[1]][1]
    assert {s for s, _ in states[dead].values()} == {"error"}
    assert all(r.startswith("MessagingTimeout") for _, r in states[dead].values())
    assert job["state"] == "done" and job["hosts_reported"] == 2


def test_cli_cache_images_wait_then_jobs_show_and_list(stack, capsys):
    from fleetcache.cmd import client
    from fleetcache.demo import serve_api

    hosts = [stack.start_compute("cli1"), stack.start_compute("cli2")]
    stack.aggregate(hosts)
    with serve_api(stack.conf) as endpoint:
        args = ["--os-endpoint", endpoint]
        assert client.main([*args, "cache-images", "agg", *stack.images, "--wait"]) == 0
        out, err = capsys.readouterr()
        assert "2/2 hosts  done" in err
        for host in hosts:
            assert re.search(rf"^\| {host} +\| cached +\| cached +\| +0 B \|$", out, re.M)
        job_id = re.search(r"^Job (\S+) on aggregate \d+: done in", out, re.M).group(1)
        assert "4 cached, 0 existing, 0 error, 0 unsupported, 0 skipped" in out

        assert client.main([*args, "jobs", "show", job_id]) == 0
        shown, _ = capsys.readouterr()
        assert f"Job {job_id} on aggregate" in shown and hosts[0] in shown

        assert client.main([*args, "jobs", "list", "agg"]) == 0
        listed, _ = capsys.readouterr()
        assert re.search(rf"^\| {job_id} \| done +\| 2 +\| 2/2 +\| 0 ", listed, re.M)

        assert client.main([*args, "cache-images", "agg", str(uuid.uuid4())]) == 1
        _, err = capsys.readouterr()
        assert "HTTP 400" in err and "could not be found" in err
        assert client.main([*args, "jobs", "list", "no-such-aggregate"]) == 1


def test_stopping_conductor_releases_its_running_job_at_once(stack):
    """A conductor stopping mid-job stores no verdict for the host in flight and lets the job
    go (its lease expires now), so that the next conductor asks that host again."""
    slow = stack.start_compute("slow", **{"fake_driver.cache_delay": 10})
    agg_id = stack.aggregate([slow])
    location = stack.cache(agg_id, stack.images[:1]).headers["Location"]
    job_id = location.rsplit("/", 1)[-1]
    deadline = time.monotonic() + 10
    while jobs.job_get(stack.db, job_id)["state"] != jobs.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)  # the call to the slow compute is in flight

    started = time.monotonic()
    stack.services[0].stop()  # as fleetcache-conductor on SIGTERM: service, then state
    stack.state.shutdown()
    job = jobs.job_get(stack.db, job_id)
    while job["lease_expires_at"] is None or job["lease_expires_at"].year != 1970:
        assert time.monotonic() - started < 8  # well before the 10 s call would have ended
        time.sleep(0.1)
        job = jobs.job_get(stack.db, job_id)
    assert job["state"] == jobs.RUNNING and job["results"] == []
