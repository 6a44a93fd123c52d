"""``openstack aggregate cache job ...``: pre-cache jobs through the ``openstack`` client.

The same calls and rendering as the ``fleetcache`` CLI (``api_client``, ``render``): the
progress bar on stderr while ``create --wait`` follows a job, and the per-host table.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from osc_lib import exceptions
from osc_lib.command import command

from fleetcache.client import render
from fleetcache.client.api_client import ApiClient, ApiError


def _api(cmd: command.Command) -> ApiClient:
    # osc-lib adds each plugin's client to the ClientManager at run time (plugin.make_client)
    api: ApiClient = cmd.app.client_manager.fleetcache  # type: ignore[attr-defined]
    return api


def _print_job(cmd: command.Command, job: dict[str, Any]) -> int:
    cmd.app.stdout.write(render.job_table(job) + "\n" + render.job_summary(job) + "\n")
    return 1 if render.job_failed(job) else 0


class CreateCacheJob(command.Command):
    """Pre-cache images on the hosts of an aggregate (a job; --wait follows it)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("aggregate", metavar="<aggregate>", help="aggregate id, uuid or name")
        parser.add_argument("images", metavar="<image>", nargs="+", help="image ids")
        parser.add_argument("--wait", action="store_true",
                            help="follow the job with a progress bar, then print its table")
        parser.add_argument("--timeout", type=float, default=None,
                            help="with --wait, give up after this many seconds")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        api = _api(self)
        try:
            aggregate = api.find_aggregate(parsed_args.aggregate)
            location = api.cache_images(aggregate["id"], list(parsed_args.images))
            if not parsed_args.wait:
                self.app.stdout.write(f"{location.rstrip('/').rsplit('/', 1)[-1]}\n")
                return 0
            bar = render.ProgressBar(sys.stderr)
            try:
                job = api.wait_job(location, on_update=bar.update, timeout=parsed_args.timeout)
            finally:
                bar.close()
        except ApiError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        return _print_job(self, job)


class ListCacheJobs(command.Lister):
    """List the pre-cache jobs of an aggregate."""

    COLUMNS = ("ID", "State", "Images", "Hosts Reported", "Total Hosts", "Created At")

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("aggregate", metavar="<aggregate>", help="aggregate id, uuid or name")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, ...]:
        api = _api(self)
        try:
            jobs = api.list_jobs(api.find_aggregate(parsed_args.aggregate)["id"])
        except ApiError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        rows = [(j["id"], j["state"], " ".join(j["image_ids"]), j.get("hosts_reported", 0),
                 j.get("total_hosts", 0), j.get("created_at")) for j in jobs]
        return self.COLUMNS, rows


class ShowCacheJob(command.Command):
    """Show a pre-cache job: one row per host, one column per image."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("job", metavar="<job>", help="job id (uuid)")
        parser.add_argument("--aggregate", metavar="<aggregate>",
                            help="the job's aggregate (id, uuid or name: faster)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> int:
        try:
            job = _api(self).find_job(parsed_args.job, aggregate=parsed_args.aggregate)
        except ApiError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        return _print_job(self, job)
