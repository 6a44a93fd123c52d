"""``openstack aggregate cache job ...``: pre-cache jobs through the ``openstack`` client.

The commands are osc-lib's ``ShowOne`` and ``Lister``, so they take every output option an
``openstack ... show/list`` takes (``-f table|json|yaml|value|shell|csv``, ``-c COLUMN``,
``--noindent``, ``--max-width``...):

* ``create`` and ``show`` show one job with the API's keys as columns (``links`` left out, as
  the client leaves it out of every show). ``hosts`` is the per-host results: the API's list
  under ``-f json|yaml``, one line per host in a table, as ``openstack aggregate show`` shows
  its ``hosts`` and ``server show`` its ``addresses``.
* ``host list`` lists the same results flat, one row per host and image, for ``-f value``,
  ``-f csv`` and ``-c`` (``-c Host -c State``), which nested data does not suit; ``--state``
  keeps the rows in one state.

``create`` takes the job's terms (``--not-before``, ``--window``/``--timezone``,
``--deadline``, ``--parallelism``, ``--origin-downloads``, ``--host-rate``, ``--job-rate``,
``--priority``; sent at ``fleetcache 1.1`` only when one is given). ``terms`` shows as
``key='value'`` in a table and as the API's object under ``-f json|yaml``; a ``scheduled``
job's ``state`` reads ``scheduled (waiting for its window until T)`` in a table and stays
``scheduled`` in machine formats, beside ``next_start_at``.

``create --wait`` follows the job with the progress bar on stderr and exits 1 when the job
failed (an image errored on some host), after showing it, as ``openstack server create
--wait`` fails for a server in error; ``show`` exits 0 whatever the job's state.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cliff import columns
from osc_lib import exceptions
from osc_lib.cli import format_columns
from osc_lib.command import command

from fleetcache.client import options, render
from fleetcache.client.api_client import ApiClient, ApiError

#: The job's keys the client leaves out: a self link is not something a person or a script
#: of the client reads (``openstack server show`` drops ``links`` too).
HIDDEN_JOB_KEYS = frozenset({"links"})
#: Columns of ``job host list``: the label, and the key of a per-image result.
HOST_RESULT_COLUMNS = (
    ("Host", "host"), ("Image ID", "image_id"), ("State", "state"), ("Reason", "reason"),
    ("Bytes Downloaded", "bytes_downloaded"), ("Download Path", "download_path"),
    ("Fallback Reason", "fallback_reason"), ("Updated At", "updated_at"),
)


class HostResultsColumn(format_columns.ListDictColumn):
    """A job's ``hosts``: the API's list for machine formats, one line per host in a table
    (``c1: <image> cached, <image> error (reason)``) rather than ``ListDictColumn``'s
    nested ``key='value'`` text."""

    def human_readable(self) -> str:
        lines = []
        for host in self._value or []:
            results = ", ".join(
                f"{image['image_id']} {image['state']}"
                + (f" ({image['reason']})" if image.get("reason") else "")
                for image in host.get("images") or [])
            lines.append(f"{host['host']}: {results}")
        return "\n".join(lines)


class JobStateColumn(columns.FormattableColumn[str]):
    """A job's ``state``: the API's word for machine formats; in a table a ``scheduled`` job
    also says until when it waits for its window."""

    def __init__(self, value: str, next_start_at: str | None = None) -> None:
        super().__init__(value)
        self._next_start_at = next_start_at

    def human_readable(self) -> str:
        return render.job_state({"state": self._value, "next_start_at": self._next_start_at})

    def machine_readable(self) -> str:
        return str(self._value)


#: How ``show`` formats the job's structured keys (the others are scalars).
JOB_FORMATTERS: dict[str, type[Any]] = {
    "image_ids": format_columns.ListColumn,
    "counts": format_columns.DictColumn,
    "terms": format_columns.DictColumn,
    "hosts": HostResultsColumn,
}


def _api(cmd: command.Command) -> ApiClient:
    # osc-lib adds each plugin's client to the ClientManager at run time (plugin.make_client)
    api: ApiClient = cmd.app.client_manager.fleetcache  # type: ignore[attr-defined]
    return api


def job_columns(job: dict[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]]:
    """``ShowOne``'s ``(columns, data)`` for a job: its keys in the API's order."""
    keys = tuple(k for k in job if k not in HIDDEN_JOB_KEYS)
    data = tuple(
        JobStateColumn(job[k], job.get("next_start_at")) if k == "state"
        else JOB_FORMATTERS[k](job[k]) if k in JOB_FORMATTERS else job[k]
        for k in keys)
    return keys, data


def _add_job_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="<job>", help="job id (uuid)")
    parser.add_argument("--aggregate", metavar="<aggregate>",
                        help="the job's aggregate (id, uuid or name: faster)")


class CreateCacheJob(command.ShowOne):
    """Pre-cache images on the hosts of an aggregate (a job; --wait follows it)."""

    def __init__(self, app: Any, app_args: Any, cmd_name: str | None = None) -> None:
        super().__init__(app, app_args, cmd_name)
        #: Set by ``take_action``: ``--wait`` ended with a failed job.
        self.job_failed = False

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("aggregate", metavar="<aggregate>", help="aggregate id, uuid or name")
        parser.add_argument("images", metavar="<image>", nargs="+", help="image ids")
        options.add_pin_option(parser, metavar="<seconds>")
        options.add_terms_options(parser, openstack_style=True)
        parser.add_argument("--wait", action="store_true",
                            help="follow the job with a progress bar on stderr, show it when "
                            "it ends, exit 1 when it failed")
        parser.add_argument("--timeout", type=float, default=None,
                            help="with --wait, give up after this many seconds")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, ...]:
        api = _api(self)
        try:
            terms = options.terms_from_args(parsed_args)
        except options.TermsUsageError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        try:
            aggregate = api.find_aggregate(parsed_args.aggregate)
            location = api.cache_images(aggregate["id"], list(parsed_args.images),
                                        pin_seconds=parsed_args.pin_seconds, terms=terms)
            job = (self._wait(api, location, parsed_args.timeout) if parsed_args.wait
                   else api.get_job(location))
        except ApiError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        self.job_failed = parsed_args.wait and render.job_failed(job)
        return job_columns(job)

    @staticmethod
    def _wait(api: ApiClient, location: str, timeout: float | None) -> dict[str, Any]:
        bar = render.ProgressBar(sys.stderr)
        try:
            return api.wait_job(location, on_update=bar.update, timeout=timeout)
        finally:
            bar.close()

    def run(self, parsed_args: argparse.Namespace) -> int:
        """Show the job, then exit 1 when ``--wait`` saw it fail."""
        status = super().run(parsed_args)
        return status or int(self.job_failed)


class ListCacheJobs(command.Lister):
    """List the pre-cache jobs of an aggregate, newest first."""

    COLUMNS = ("ID", "State", "Images", "Hosts Reported", "Total Hosts", "Created At")
    LONG_COLUMNS = ("Counts", "Bytes Downloaded", "Started At", "Finished At", "Pin Until",
                    "Catch Up Until", "Error", "Terms", "Next Start At")

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        parser.add_argument("aggregate", metavar="<aggregate>", help="aggregate id, uuid or name")
        parser.add_argument("--long", action="store_true",
                            help="also the counts per state, bytes, times, pin, error, "
                            "terms and next start")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, ...]:
        api = _api(self)
        try:
            jobs = api.list_jobs(api.find_aggregate(parsed_args.aggregate)["id"])
        except ApiError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        labels = self.COLUMNS + (self.LONG_COLUMNS if parsed_args.long else ())
        return labels, [self._row(job, parsed_args.long) for job in jobs]

    @staticmethod
    def _row(job: dict[str, Any], long: bool) -> tuple[Any, ...]:
        row = (job["id"], JobStateColumn(job["state"], job.get("next_start_at")),
               format_columns.ListColumn(job["image_ids"]),
               job.get("hosts_reported", 0), job.get("total_hosts", 0), job.get("created_at"))
        if not long:
            return row
        return row + (format_columns.DictColumn(job.get("counts") or {}),
                      job.get("bytes_downloaded", 0), job.get("started_at"),
                      job.get("finished_at"), job.get("pin_until"),
                      job.get("catch_up_until"), job.get("error"),
                      format_columns.DictColumn(job.get("terms") or {}),
                      job.get("next_start_at"))


class ShowCacheJob(command.ShowOne):
    """Show a pre-cache job, with its per-host results (hosts)."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        _add_job_argument(parser)
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, ...]:
        try:
            job = _api(self).find_job(parsed_args.job, aggregate=parsed_args.aggregate)
        except ApiError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        return job_columns(job)


class ListCacheJobHosts(command.Lister):
    """List a pre-cache job's results: one row per host and image."""

    def get_parser(self, prog_name: str) -> argparse.ArgumentParser:
        parser = super().get_parser(prog_name)
        _add_job_argument(parser)
        parser.add_argument("--state", metavar="<state>",
                            help="only the results in this state (cached, existing, error, "
                            "unsupported, skipped, pending, waiting)")
        return parser

    def take_action(self, parsed_args: argparse.Namespace) -> tuple[Any, ...]:
        try:
            job = _api(self).find_job(parsed_args.job, aggregate=parsed_args.aggregate)
        except ApiError as exc:
            raise exceptions.CommandError(str(exc)) from exc
        rows = [
            tuple({**image, "host": host["host"]}.get(key) for _, key in HOST_RESULT_COLUMNS)
            for host in job.get("hosts") or []
            for image in host.get("images") or []
            if parsed_args.state is None or image.get("state") == parsed_args.state
        ]
        return tuple(label for label, _ in HOST_RESULT_COLUMNS), rows
