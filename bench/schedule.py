#!/usr/bin/env python3
"""Scheduling cost at 10,000 hosts: fleetcache's ``select_destinations`` against Placement's own
``GET /allocation_candidates`` for the same query (the floor) and a Nova-style pass (issue 8).

Sets up a real Placement on the machine's PostgreSQL (``_placement_fleet``: gunicorn as the
stack runs it, a database of its own) holding ``--providers`` compute providers: every host has
COMPUTE_IMAGE_TYPE_RAW, 70% also COMPUTE_IMAGE_TYPE_QCOW2, 20% CUSTOM_SSD; every host is in
its cell's aggregate, 5% in a strict isolation aggregate ``trove``
(``image_isolation_property=tesora_edition``) and half in one of eight rack aggregates with
``ssd`` metadata. fleetcache's database (SQLite) holds the matching compute services in
``--cells`` cells, the aggregates and 200 hosts that reported the image cached.

Two requests of a 1 vCPU / 512 MB / 1 GB flavor for a qcow2 image, with the stack's filters
(ComputeFilter, AggregateImagePropertiesIsolation, AggregateInstanceExtraSpecsFilter,
AggregateImageStrictIsolation) and the image-type request filter: ``untagged`` (kept out of
the isolation aggregate: ``member_of=!in:<trove>``; the headline) and ``tagged``
(``tesora_edition`` set: ``member_of=in:<trove>``). For each, per round, in rotating order:

* placement: ``GET /allocation_candidates`` with the query the request filters built, alone;
* fleetcache: ``select_destinations`` without its claim (request filters, the Placement
  query, host states, host filters, weighers): the claim is one more request whatever the
  fleet size, timed apart as ``claim`` (``select_destinations`` with its claim, then the
  claim released, untimed);
* nova-style: the candidates of the resources alone (``limit`` = ``max_placement_results``, as
  Nova), then the image-type trait, strict isolation and the same host filters in Python.

Prints per path the median and the worst round, how many hosts each path ends with, and last
the headline ``schedule: providers=N ... ratio=R``, R = fleetcache's median over Placement's.

Run: ``.venv/bin/python bench/schedule.py [--providers 10000 --cells 4 --rounds 15]``
"""

from __future__ import annotations

import argparse
import datetime
import random
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# eventlet (pulled in by oslo.service) warns on import; nothing here uses it. fleetcache.cmd
# silences it for the commands, and this script imports no command.
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")

from _benchlib import (  # noqa: E402
    exit_on_sigterm,
    headline,
    loadavg,
    log,
    median,
    parse_with_smoke,
)
from _placement_fleet import Provider, load_providers, placement_server  # noqa: E402
from oslo_config import cfg  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from fleetcache.common import binaries, config, exception  # noqa: E402
from fleetcache.common.context import get_admin_context  # noqa: E402
from fleetcache.common.db import migration, models  # noqa: E402
from fleetcache.common.db.session import Database  # noqa: E402
from fleetcache.conductor.placement import provider_uuid  # noqa: E402
from fleetcache.conductor.scheduler import FlavorSpec, RequestSpec, Scheduler  # noqa: E402
from fleetcache.conductor.scheduler.filters.base import BaseHostFilter  # noqa: E402
from fleetcache.conductor.scheduler.filters.runner import run_filters  # noqa: E402
from fleetcache.conductor.scheduler.host_state import HostState, build_host_states  # noqa: E402
from fleetcache.conductor.scheduler.request import FilterRequest  # noqa: E402
from fleetcache.conductor.scheduler.weighers import weigh  # noqa: E402
from fleetcache.demo import placement_embedded  # noqa: E402

FILTERS = ["ComputeFilter", "AggregateImagePropertiesIsolation",
           "AggregateInstanceExtraSpecsFilter", "AggregateImageStrictIsolation"]
IMAGE_ID = "5e1f7c3a-0000-4000-8000-00000000be9c"
FLAVOR = FlavorSpec("bench", vcpus=1, memory_mb=512, root_gb=1, extra_specs={})
TROVE = str(uuid.UUID(int=1))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--providers", type=int, default=10000)
    parser.add_argument("--cells", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--profile", action="store_true",
                        help="profile the fleetcache path (cProfile, top 25 by cumulative)")
    return parse_with_smoke(parser, {"providers": 200, "cells": 2, "rounds": 1})


class Fleet:
    """The hosts, their cells, traits and aggregates (the same in Placement and fleetcache)."""

    def __init__(self, providers: int, cells: int, seed: int) -> None:
        rng = random.Random(seed)
        self.cells = cells
        self.cell_aggs = [str(uuid.UUID(int=100 + c)) for c in range(cells)]
        self.racks = [str(uuid.UUID(int=200 + r)) for r in range(8)]
        self.hosts: list[tuple[str, int, list[str], list[str]]] = []
        for n in range(providers):
            cell = n % cells
            traits = ["COMPUTE_IMAGE_TYPE_RAW"]
            if rng.random() < 0.7:
                traits.append("COMPUTE_IMAGE_TYPE_QCOW2")
            if rng.random() < 0.2:
                traits.append("CUSTOM_SSD")
            aggs = [self.cell_aggs[cell]]
            if rng.random() < 0.05:
                aggs.append(TROVE)
            if rng.random() < 0.5:
                aggs.append(rng.choice(self.racks))
            self.hosts.append((f"bench-c{cell}-{n:05d}", cell, traits, aggs))
        self.cached = {h for h, *_ in rng.sample(self.hosts, 200)}

    def providers(self) -> list[Provider]:
        return [Provider(provider_uuid(h), h, traits, aggs) for h, _, traits, aggs in self.hosts]

    def metadata(self) -> dict[str, dict[str, str]]:
        md = {agg: {"cell": str(c)} for c, agg in enumerate(self.cell_aggs)}
        md[TROVE] = {"image_isolation_property": "tesora_edition"}
        for r, agg in enumerate(self.racks):
            md[agg] = {"ssd": "true" if r % 2 else "false"}
        return md

    def load_database(self, db: Database) -> None:
        now = models.utcnow()
        with db.transaction() as session:
            session.execute(insert(models.Cell), [
                {"id": c + 1, "uuid": str(uuid.uuid4()), "name": f"cell{c + 1}",
                 "transport_url": f"fake://cell{c + 1}", "created_at": now}
                for c in range(self.cells)])
            session.execute(insert(models.Service), [
                {"uuid": str(uuid.uuid4()), "host": h, "binary": binaries.COMPUTE,
                 "topic": "compute", "cell_id": cell + 1, "disabled": False,
                 "forced_down": False, "last_seen_up": now, "report_count": 1,
                 "capabilities": {}, "placement_synced_at": now, "created_at": now}
                for h, cell, _, _ in self.hosts])
            metadata = self.metadata()
            agg_ids = {}
            for n, (agg, md) in enumerate(metadata.items(), start=1):
                session.execute(insert(models.Aggregate), [
                    {"id": n, "uuid": agg, "name": f"agg{n}", "created_at": now}])
                session.execute(insert(models.AggregateMetadata), [
                    {"aggregate_id": n, "key": k, "value": v} for k, v in md.items()])
                agg_ids[agg] = n
            session.execute(insert(models.AggregateHost), [
                {"aggregate_id": agg_ids[a], "host": h} for h, _, _, aggs in self.hosts
                for a in aggs])
            last_used = datetime.datetime(2026, 1, 1)
            session.execute(insert(models.HostImage), [
                {"host": h, "image_id": IMAGE_ID, "size": 1, "last_used": last_used,
                 "updated_at": now} for h in sorted(self.cached)])


class ImageTypeTrait(BaseHostFilter):
    """The Nova-style pass's image-type check, in Python, from the provider summary."""

    def host_fails(self, host: HostState, request: FilterRequest) -> str | None:
        return None if "COMPUTE_IMAGE_TYPE_QCOW2" in host.traits else "no QCOW2 trait"


def make_spec(tagged: bool) -> RequestSpec:
    image: dict[str, Any] = {"id": IMAGE_ID, "disk_format": "qcow2", "container_format": "bare"}
    if tagged:
        image["tesora_edition"] = "ee"
    return RequestSpec([str(uuid.uuid4())], "bench", "bench", FLAVOR, image)


class Paths:
    """The timed paths of one request."""

    def __init__(self, scheduler: Scheduler, spec: RequestSpec) -> None:
        self.s = scheduler
        self.spec = spec
        self.query, _ = scheduler.build_query(spec)
        self.hosts: dict[str, int] = {}

    def placement(self) -> None:
        response = self.s.client.get_allocation_candidates(self.query.params())
        self.hosts["placement"] = len(response["provider_summaries"])

    def fleetcache(self) -> None:
        query, request = self.s.build_query(self.spec)
        hosts, _ = self.s.candidates(query, request)
        if not hosts:
            raise RuntimeError("fleetcache's path found no host")
        self.hosts["fleetcache"] = len(hosts)

    def nova_style(self) -> None:
        query, request = self.s.build_query(self.spec)
        response = self.s.client.get_allocation_candidates(query.without_pushdown().params())
        hosts = build_host_states(self.s.db, self.s.provider_hosts, request.catalog, response)
        passed, _ = run_filters([ImageTypeTrait(self.s.conf), *self.s.host_filters], hosts,
                                request)
        self.hosts["nova-style"] = len(weigh(self.s.weighers, passed, request))

    def claim(self) -> float:
        spec = make_spec("tesora_edition" in self.spec.image)
        started = time.perf_counter()
        try:
            [selection] = self.s.select_destinations(get_admin_context(), spec)
        except exception.NoValidHost as exc:
            raise RuntimeError(f"claim failed: {exc}: {exc.filter_summary}") from exc
        elapsed = time.perf_counter() - started
        self.s.release(selection.instance_uuid)
        return elapsed


def timed(fn: Callable[[], None]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def run(paths: Paths, rounds: int) -> dict[str, list[float]]:
    names: list[tuple[str, Callable[[], None]]] = [
        ("placement", paths.placement), ("fleetcache", paths.fleetcache),
        ("nova-style", paths.nova_style)]
    for _name, fn in names:  # warm-up: connections, caches, the provider map
        fn()
    times: dict[str, list[float]] = {name: [] for name, _ in names}
    times["select+claim"] = []
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name, fn in order:
            times[name].append(timed(fn))
        times["select+claim"].append(paths.claim())
    return times


def main() -> int:
    args = parse_args()
    exit_on_sigterm()
    fleet = Fleet(args.providers, args.cells, args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-schedule-") as tmp, \
            placement_server("fleetcache_bench_placement") as (endpoint, url):
        started = time.monotonic()
        load_providers(url, fleet.providers())
        db = Database(f"sqlite:///{tmp}/fleetcache.sqlite")
        migration.db_sync(db)
        fleet.load_database(db)
        log(f"fleet loaded in {time.monotonic() - started:.1f} s")
        conf = cfg.ConfigOpts()
        config.register_all(conf)
        conf([], project="fleetcache", default_config_files=[])
        placement_embedded.point_at(conf, endpoint)
        conf.set_override("enabled_filters", FILTERS, group="filter_scheduler")
        # the services' heartbeats were written once, at load: they stay up for the whole run
        conf.set_override("service_down_time", 86400)
        scheduler = Scheduler(conf, db, _client(conf))
        if args.profile:
            _profile(Paths(scheduler, make_spec(False)), args.rounds)
            return 0
        results = {}
        for label in ("untagged", "tagged"):
            paths = Paths(scheduler, make_spec(label == "tagged"))
            log(f"{label}: GET /allocation_candidates?"
                + "&".join(f"{k}={v}" for k, v in paths.query.params()))
            results[label] = (run(paths, args.rounds), dict(paths.hosts))
        db.dispose()
    load = loadavg()
    print(f"{'request':10} {'path':13} {'p50 s':>8} {'worst s':>8} {'hosts':>6}")
    for label, (times, hosts) in results.items():
        for name, values in times.items():
            print(f"{label:10} {name:13} {median(values):8.3f} {max(values):8.3f} "
                  f"{hosts.get(name, ''):>6}")
    times, hosts = results["untagged"]
    fc, pl, nova = (median(times[n]) for n in ("fleetcache", "placement", "nova-style"))
    print(headline(
        "schedule", fc / pl, providers=args.providers, cells=args.cells, rounds=args.rounds,
        request="qcow2+strict-isolation", fleetcache_p50=fc, fleetcache_worst=max(
            times["fleetcache"]), placement_p50=pl, placement_worst=max(times["placement"]),
        nova_style_p50=nova, nova_style_worst=max(times["nova-style"]),
        claim_p50=median(times["select+claim"]), hosts_fleetcache=hosts["fleetcache"],
        hosts_nova_style=hosts["nova-style"], load=load))
    return 0


def _profile(paths: Paths, rounds: int) -> None:
    import cProfile
    import pstats

    paths.fleetcache()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(rounds):
        paths.fleetcache()
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(30)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(20)


def _client(conf: cfg.ConfigOpts) -> Any:
    from fleetcache.conductor.placement import PlacementClient

    client = PlacementClient.from_conf(conf)
    assert client is not None
    return client


if __name__ == "__main__":
    sys.exit(main())
