"""The ``fleetcache`` command line: the operator's commands, a client of the REST API.

Commands::

    fleetcache cache-images AGG IMG [IMG ...] [--wait]   pre-cache images on an aggregate
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
Keystone. Exit status: 0 on success, 1 when the API refused or a job failed (an image errored
on some host), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from fleetcache.client import render
from fleetcache.client.api_client import ApiClient, ApiError

PROG = "fleetcache"


def _cache_images(api: ApiClient, args: argparse.Namespace) -> int:
    aggregate = api.find_aggregate(args.aggregate)
    location = api.cache_images(aggregate["id"], list(args.images))
    job_id = location.rstrip("/").rsplit("/", 1)[-1]
    if not args.wait:
        print(f"Pre-cache job {job_id} queued on aggregate {aggregate['name']} "
              f"({aggregate['id']}): {location}")
        return 0
    bar = render.ProgressBar(sys.stderr)
    try:
        job = api.wait_job(location, on_update=bar.update, interval=args.poll_interval,
                           timeout=args.timeout)
    finally:
        bar.close()
    return _print_job(job)


def _print_job(job: dict[str, Any]) -> int:
    print(render.job_table(job))
    print(render.job_summary(job))
    return 1 if render.job_failed(job) else 0


def _jobs_show(api: ApiClient, args: argparse.Namespace) -> int:
    job = api.find_job(args.job, aggregate=args.aggregate)
    if job["state"] not in ("done", "failed"):
        interim = render.hosts_in_interim_states(job)
        print(f"Job {job['id']} is {job['state']}: "
              f"{job.get('hosts_reported', 0)}/{job.get('total_hosts', 0)} hosts reported"
              + (f", {interim}" if interim else ""))
    return _print_job(job)


def _jobs_list(api: ApiClient, args: argparse.Namespace) -> int:
    aggregate = api.find_aggregate(args.aggregate)
    print(render.jobs_table(api.list_jobs(aggregate["id"])))
    return 0


def _cache_list(api: ApiClient, args: argparse.Namespace) -> int:
    print(render.host_cache_table(api.get_host_image_cache(args.host)))
    return 0


def _add_cache_commands(commands: Any) -> None:
    """``fleetcache cache list HOST``."""
    cache = commands.add_parser("cache", help="compute hosts' image caches")
    cache_commands = cache.add_subparsers(dest="cache_command", required=True,
                                          metavar="COMMAND")
    listing = cache_commands.add_parser(
        "list", help="a host's cached images, sizes and last use, as it last reported them")
    listing.add_argument("host", metavar="HOST", help="compute host name")
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
    cache.set_defaults(func=_cache_images)

    jobs = commands.add_parser("jobs", help="pre-cache jobs")
    job_commands = jobs.add_subparsers(dest="jobs_command", required=True, metavar="COMMAND")
    show = job_commands.add_parser("show", help="show a job per host and image")
    show.add_argument("job", metavar="JOB", help="job id (uuid)")
    show.add_argument("--aggregate", metavar="AGG", help="the job's aggregate (faster)")
    show.set_defaults(func=_jobs_show)
    listing = job_commands.add_parser("list", help="list an aggregate's jobs")
    listing.add_argument("aggregate", metavar="AGG", help="aggregate id, uuid or name")
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
