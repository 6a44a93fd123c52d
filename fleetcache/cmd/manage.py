"""``fleetcache-manage``: the operator's database, cell and service commands.

::

    fleetcache-manage [--config-file F] db sync | db version
    fleetcache-manage cell create --name N --transport-url URL
    fleetcache-manage cell list [--verbose] | cell update CELL [--name N] [--transport-url URL]
    fleetcache-manage cell delete CELL
    fleetcache-manage service list [--binary B]
    fleetcache-manage service disable HOST [--binary B] [--reason R] | service enable HOST
    fleetcache-manage placement sync-aggregates
    fleetcache-manage status

Exit status: 0 done, 1 failed (not found, conflict, database or Placement unreachable), 2 bad
usage or configuration. ``status`` (the upgrade checks, :mod:`fleetcache.cmd._status`) exits
as oslo.upgradecheck does: 0 success, 1 warning, 2 failure.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import oslo_messaging as messaging
import prettytable
import sqlalchemy
from oslo_config import cfg

from fleetcache.cmd import _status, common
from fleetcache.common import binaries, exception, rpc, servicegroup
from fleetcache.common.db import aggregates as db_aggregates
from fleetcache.common.db import cells as db_cells
from fleetcache.common.db import migration
from fleetcache.common.db import services as db_services
from fleetcache.common.db.session import Database
from fleetcache.conductor.cells import redact_url
from fleetcache.conductor.placement import PlacementClient, ProviderSync

PROG = "fleetcache-manage"

Command = Callable[[cfg.ConfigOpts, Database, Any], int]


# -- db -----------------------------------------------------------------------------------------


def db_sync(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    migration.db_sync(db, args.arg_revision)
    print(f"Database at revision {migration.db_version(db)}")
    return 0


def db_version(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    print(migration.db_version(db) or "None (never synced)")
    return 0


# -- cell ---------------------------------------------------------------------------------------


def _check_transport_url(conf: cfg.ConfigOpts, url: str) -> None:
    try:
        rpc.parse_rpc_transport_url(conf, url)
    except messaging.InvalidTransportURL as exc:
        raise exception.InvalidInput(reason=f"invalid --transport-url: {exc}") from exc


def cell_create(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    _check_transport_url(conf, args.arg_transport_url)
    cell = db_cells.cell_create(db, args.arg_name, args.arg_transport_url)
    print(f"Created cell {cell['name']} ({cell['uuid']})")
    return 0


def cell_list(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    table = prettytable.PrettyTable(["Name", "UUID", "Transport URL"])
    table.align = "l"
    for cell in db_cells.cell_list(db):
        url = cell["transport_url"] if args.arg_verbose else redact_url(cell["transport_url"])
        table.add_row([cell["name"], cell["uuid"], url])
    print(table)
    return 0


def cell_update(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    if args.arg_name is None and args.arg_transport_url is None:
        raise exception.InvalidInput(reason="give --name and/or --transport-url")
    if args.arg_transport_url is not None:
        _check_transport_url(conf, args.arg_transport_url)
    try:
        cell = db_cells.cell_update(db, args.arg_cell, args.arg_name, args.arg_transport_url)
    except sqlalchemy.exc.IntegrityError as exc:
        raise exception.CellExists(name=args.arg_name) from exc
    print(f"Updated cell {cell['name']} ({cell['uuid']})")
    return 0


def cell_delete(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    db_cells.cell_delete(db, args.arg_cell)
    print(f"Deleted cell {args.arg_cell}")
    return 0


# -- service ------------------------------------------------------------------------------------


def service_list(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    table = prettytable.PrettyTable(
        ["Host", "Binary", "Cell", "State", "Status", "Disabled Reason", "Last Seen Up"]
    )
    table.align = "l"
    for svc in db_services.service_list(db, binary=args.arg_binary):
        up = servicegroup.service_is_up(svc, conf.service_down_time)
        table.add_row([
            svc["host"],
            svc["binary"],
            svc["cell"]["name"] if svc["cell"] else "-",
            "up" if up else "down",
            "disabled" if svc["disabled"] else "enabled",
            svc["disabled_reason"] or "-",
            svc["last_seen_up"].isoformat(timespec="seconds") if svc["last_seen_up"] else "-",
        ])
    print(table)
    return 0


def _set_disabled(db: Database, args: Any, disabled: bool) -> int:
    svc = db_services.service_get(db, args.arg_host, args.arg_binary)
    reason = getattr(args, "arg_reason", None) if disabled else None
    db_services.service_update(db, svc["id"], disabled=disabled, disabled_reason=reason)
    print(f"{'Disabled' if disabled else 'Enabled'} {args.arg_binary} on {args.arg_host}")
    return 0


def service_disable(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    return _set_disabled(db, args, True)


def service_enable(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    return _set_disabled(db, args, False)


# -- placement ----------------------------------------------------------------------------------


def placement_sync_aggregates(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    """Set every compute provider's Placement aggregates to the fleetcache aggregates its host
    is in, printing what changed (drift a lost ``sync_host_aggregates`` cast left)."""
    client = PlacementClient.from_conf(conf)
    if client is None:
        raise exception.InvalidInput(reason="Placement is not configured ([placement] auth_type)")
    providers = ProviderSync(client, conf.placement.generation_conflict_retries)
    services = db_services.service_list(db, binary=binaries.COMPUTE)
    wanted = db_aggregates.aggregate_uuids_by_host(db, [s["host"] for s in services])
    changed = 0
    for svc in services:
        result = providers.sync_aggregates(svc["host"], wanted[svc["host"]])
        if result is None:
            print(f"{svc['host']}: no resource provider yet (skipped)")
        elif result.changed:
            changed += 1
            print(f"{svc['host']}: {result.describe()}")
    print(f"{changed} of {len(services)} resource provider(s) changed")
    return 0


def status(conf: cfg.ConfigOpts, db: Database, args: Any) -> int:
    return int(_status.Checks(conf, db).check())


# -- parsing and dispatch -----------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Stores every argument as ``arg_<name>``.

    NOTE: oslo.config refuses sub-command attributes that share a name with a registered
    option (``host``, ``transport_url``), hence the prefix.
    """

    def add_argument(self, *flags: Any, **kwargs: Any) -> Any:
        if "dest" not in kwargs:
            name = flags[-1].lstrip("-").replace("-", "_")
            kwargs["dest"] = f"arg_{name}"
            if "action" not in kwargs:
                kwargs.setdefault("metavar", name.upper())
            if not flags[-1].startswith("-"):
                flags = (kwargs.pop("dest"),)
        return super().add_argument(*flags, **kwargs)


def _add(sub: Any, name: str, func: Command, help: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help)
    parser.set_defaults(func=func)
    return parser


def add_command_parsers(subparsers: Any) -> None:
    """Build the ``category action`` parsers (oslo.config ``SubCommandOpt`` handler)."""
    db = subparsers.add_parser("db", help="database schema").add_subparsers(
        dest="action", required=True, parser_class=_Parser)
    _add(db, "sync", db_sync, "upgrade the schema").add_argument(
        "--revision", default="head", help="target revision (default: head)")
    _add(db, "version", db_version, "print the schema revision")

    cell = subparsers.add_parser("cell", help="cells and their transports").add_subparsers(
        dest="action", required=True, parser_class=_Parser)
    p = _add(cell, "create", cell_create, "create a cell")
    p.add_argument("--name", required=True)
    p.add_argument("--transport-url", required=True, help="the cell's broker URL")
    _add(cell, "list", cell_list, "list cells").add_argument(
        "--verbose", action="store_true", help="show transport URLs with their passwords")
    p = _add(cell, "update", cell_update, "rename a cell or change its transport")
    p.add_argument("cell", help="cell name or uuid")
    p.add_argument("--name")
    p.add_argument("--transport-url")
    _add(cell, "delete", cell_delete, "delete a cell without services").add_argument(
        "cell", help="cell name or uuid")

    svc = subparsers.add_parser("service", help="registered services").add_subparsers(
        dest="action", required=True, parser_class=_Parser)
    _add(svc, "list", service_list, "list services").add_argument("--binary")
    for name, func in (("disable", service_disable), ("enable", service_enable)):
        p = _add(svc, name, func, f"{name} a service")
        p.add_argument("host")
        p.add_argument("--binary", default=binaries.COMPUTE)
        if name == "disable":
            p.add_argument("--reason")

    placement = subparsers.add_parser(
        "placement", help="the computes' resource providers in Placement").add_subparsers(
        dest="action", required=True, parser_class=_Parser)
    _add(placement, "sync-aggregates", placement_sync_aggregates,
         "mirror every compute's aggregates into Placement, printing what changed")

    subparsers.add_parser("status", help="upgrade checks").set_defaults(func=status)


CATEGORY_OPT = cfg.SubCommandOpt(
    "category", title="Command categories", handler=add_command_parsers
)


def run(conf: cfg.ConfigOpts) -> int:
    """Run the parsed command. :returns: the exit status."""
    func: Command = conf.category.func
    db = common.open_database(conf, PROG, check_schema=conf.category.name != "db")
    try:
        return func(conf, db, conf.category)
    except exception.FleetcacheException as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    except sqlalchemy.exc.SQLAlchemyError as exc:
        print(f"ERROR: database error: {getattr(exc, 'orig', None) or exc}", file=sys.stderr)
        return 1
    finally:
        db.dispose()


def main(argv: Sequence[str] | None = None, conf: cfg.ConfigOpts | None = None) -> int:
    conf = conf if conf is not None else cfg.CONF
    conf = common.parse_config(argv, PROG, conf=conf, cli_opts=[CATEGORY_OPT])
    return run(conf)


if __name__ == "__main__":
    sys.exit(main())
