"""The ``fleetcache`` command line: the operator's commands, a client of the REST API.

Commands::

    fleetcache cache-images AGG IMG [IMG ...] [--wait]   pre-cache images on an aggregate
                            [--pin-seconds SECONDS]      (and pin them for a while)
                            [--not-before TIME] [--window HH:MM-HH:MM [--timezone NAME]]
                            [--deadline TIME] [--parallelism N] [--origin-downloads N]
                            [--host-rate BYTES/s] [--job-rate BYTES/s] [--priority N]
                                                         on the job's terms (fleetcache 1.1)
    fleetcache jobs list AGG                             the aggregate's pre-cache jobs
    fleetcache jobs show JOB [--aggregate AGG]           one job, per host and image
    fleetcache cache list HOST                           a compute's cached images, sizes,
                                                         last use (its last cache report)
    fleetcache demo                                      the embedded demo (no services needed):
                                                         run by the entry point,
                                                         :mod:`fleetcache.cmd.client`

``AGG`` is an aggregate's id, uuid or name. Authentication is the ``openstack`` client's:
``--os-cloud``/``OS_CLOUD`` names a cloud of ``clouds.yaml``, or the ``OS_*`` variables
(``OS_AUTH_URL``, ``OS_USERNAME``, ``OS_PASSWORD``, ``OS_PROJECT_NAME``...) describe one; the
API's endpoint is the catalog's ``compute`` service. For a noauth lab, ``--os-endpoint``
(``http://host:port`` or ``.../v2.1``) with ``--os-token`` (or ``OS_AUTH_TYPE=none``) skips
Keystone.

Every command but ``demo`` takes ``-f/--format table|json|yaml``: ``json`` and ``yaml`` print
the API's object as it answered it (a job as ``GET .../images/jobs/{id}``, a list of jobs,
a host's image cache), with the keys docs/api.md documents, for scripts; ``cache-images``
prints the job it created (at its end with ``--wait``). Progress goes to stderr, never into
the data. Exit status: 0 on success; 1 when the API refused, or when the job that ``jobs
show`` or ``cache-images --wait`` printed is not over (``done``, or ``catching_up``) or has an
image in ``error`` on some host (whatever the format, after printing it); 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fleetcache.client import options, render
from fleetcache.client.api_client import ApiClient, ApiError

PROG = "fleetcache"


def _cache_images(api: ApiClient, args: argparse.Namespace) -> int:
    try:
        terms = options.terms_from_args(args)
    except options.TermsUsageError as exc:
        print(f"{PROG} cache-images: {exc}", file=sys.stderr)
        return 2
    aggregate = api.find_aggregate(args.aggregate)
    location = api.cache_images(aggregate["id"], list(args.images),
                                pin_seconds=args.pin_seconds, terms=terms)
    job_id = location.rstrip("/").rsplit("/", 1)[-1]
    if not args.wait:
        if args.format != "table":
            return _print_job(api.get_job(location), args.format, exit_status=False)
        print(f"Pre-cache job {job_id} queued on aggregate {aggregate['name']} "
              f"({aggregate['id']}): {location}")
        return 0
    bar = render.ProgressBar(sys.stderr)
    try:
        job = api.wait_job(location, on_update=bar.update, interval=args.poll_interval,
                           timeout=args.timeout)
    finally:
        bar.close()
    return _print_job(job, args.format)


def _print_job(job: dict[str, Any], fmt: str, exit_status: bool = True) -> int:
    """Print ``job`` as ``fmt`` says; :returns: 1 when ``exit_status`` and the job failed."""
    if fmt == "table":
        print(render.job_table(job))
        print(render.job_summary(job))
    else:
        sys.stdout.write(render.machine_readable(job, fmt))
    return 1 if exit_status and render.job_failed(job) else 0


def _jobs_show(api: ApiClient, args: argparse.Namespace) -> int:
    job = api.find_job(args.job, aggregate=args.aggregate)
    if args.format == "table" and job["state"] not in ("done", "failed"):
        interim = render.hosts_in_interim_states(job)
        print(f"Job {job['id']} is {render.job_state(job)}: "
              f"{job.get('hosts_reported', 0)}/{job.get('total_hosts', 0)} hosts reported"
              + (f", {interim}" if interim else ""))
    return _print_job(job, args.format)


def _jobs_list(api: ApiClient, args: argparse.Namespace) -> int:
    aggregate = api.find_aggregate(args.aggregate)
    jobs = api.list_jobs(aggregate["id"])
    if args.format == "table":
        print(render.jobs_table(jobs))
    else:
        sys.stdout.write(render.machine_readable(jobs, args.format))
    return 0


def _cache_list(api: ApiClient, args: argparse.Namespace) -> int:
    cache = api.get_host_image_cache(args.host)
    if args.format == "table":
        print(render.host_cache_table(cache))
    else:
        sys.stdout.write(render.machine_readable(cache, args.format))
    return 0


def _add_cache_commands(commands: Any) -> None:
    """``fleetcache cache list HOST``."""
    cache = commands.add_parser("cache", help="compute hosts' image caches")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True,
                                          metavar="COMMAND")
    listing = cache_commands.add_parser(
        "list", help="a host's cached images, sizes and last use, as it last reported them")
    listing.add_argument("host", metavar="HOST", help="compute host name")
    options.add_format_option(listing)
    listing.set_defaults(func=_cache_list)


def _add_demo_command(commands: Any) -> None:
    """``fleetcache demo [--hosts N] [--keep] [--verbose]``."""
    demo = commands.add_parser("demo", help="run the embedded demo: conductor, API and "
                               "computes in this process, pre-caching generated images")
    demo.add_argument("--hosts", type=int, default=3, help="compute agents (default: 3)")
    demo.add_argument("--keep", action="store_true", help="keep the demo's temporary directory")
    demo.add_argument("--verbose", action="store_true", help="show the services' logs")
    demo.set_defaults(func=None)


def build_parser(demo: bool = False) -> argparse.ArgumentParser:
    """The command line; with ``demo``, the ``demo`` command too."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Pre-cache images on the hosts of an aggregate and follow the jobs, "
        "through the fleetcache REST API.",
        epilog="AGG is an aggregate id, uuid or name. Environment: OS_CLOUD, or OS_AUTH_URL, "
        "OS_USERNAME, OS_PASSWORD, OS_PROJECT_NAME... as for the openstack client; "
        "OS_ENDPOINT and OS_TOKEN for a noauth lab.",
    )
    parser.add_argument("--os-cloud", help="a cloud of clouds.yaml (default: $OS_CLOUD)")
    parser.add_argument("--os-region-name", help="region (default: $OS_REGION_NAME)")
    parser.add_argument("--os-endpoint", help="API endpoint instead of the catalog's "
                        "(default: $OS_ENDPOINT)")
    parser.add_argument("--os-token", help="token for a noauth lab or an endpoint given "
                        "(default: $OS_TOKEN)")
    parser.add_argument("--http-timeout", type=float, default=60.0,
                        help="seconds to wait for one API answer (default: 60)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    cache = commands.add_parser("cache-images", help="pre-cache images on an aggregate's hosts")
    cache.add_argument("aggregate", metavar="AGG", help="aggregate id, uuid or name")
    cache.add_argument("images", metavar="IMG", nargs="+", help="image ids")
    cache.add_argument("--wait", action="store_true",
                       help="follow the job with a progress bar and print its table")
    cache.add_argument("--poll-interval", type=float, default=0.5, help=argparse.SUPPRESS)
    cache.add_argument("--timeout", type=float, default=None,
                       help="with --wait, give up after this many seconds")
    options.add_pin_option(cache)
    options.add_terms_options(cache)
    options.add_format_option(cache)
    cache.set_defaults(func=_cache_images)

    jobs = commands.add_parser("jobs", help="pre-cache jobs")
    job_commands = jobs.add_subparsers(dest="jobs_command", required=True, metavar="COMMAND")
    show = job_commands.add_parser("show", help="show a job per host and image")
    show.add_argument("job", metavar="JOB", help="job id (uuid)")
    show.add_argument("--aggregate", metavar="AGG", help="the job's aggregate (faster)")
    options.add_format_option(show)
    show.set_defaults(func=_jobs_show)
    listing = job_commands.add_parser("list", help="list an aggregate's jobs")
    listing.add_argument("aggregate", metavar="AGG", help="aggregate id, uuid or name")
    options.add_format_option(listing)
    listing.set_defaults(func=_jobs_list)

    _add_cache_commands(commands)
    if demo:
        _add_demo_command(commands)
    return parser


def main(
    argv: Sequence[str] | None = None,
    demo: Callable[[argparse.Namespace], int] | None = None,
) -> int:
    """Run one command; :returns: its exit status.

    :param demo: runs ``fleetcache demo`` with its parsed arguments. The entry point
        (:mod:`fleetcache.cmd.client`) passes the embedded demo: it runs every role, so this
        room, which imports nothing of the services, cannot load it. Without it the command
        line has no ``demo`` command.
    """
    args = build_parser(demo=demo is not None).parse_args(argv)
    if demo is not None and args.command == "demo":
        return demo(args)
    try:
        api = ApiClient.from_env(args.os_endpoint, args.os_token, timeout=args.http_timeout,
                                 cloud=args.os_cloud, region=args.os_region_name)
        status: int = args.func(api, args)
    except ApiError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return status
