"""What every fleetcache command does first: options, configuration files, logging.

A bad command line or configuration value, an unreadable configuration file, a log file that
cannot be opened, a log destination that cannot be used (an unknown ``syslog_log_facility``,
``use_journal`` without the systemd bindings) or an unusable ``[database] connection`` or
``transport_url`` ends the command with one line naming the problem and the fix, and exit
status :data:`EXIT_CONFIG` (systemd units do not restart on it), never a traceback. A database
that is down or not synced ends it with status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib
import io
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import oslo_messaging as messaging
import sqlalchemy
from oslo_config import cfg
from oslo_log import log

import fleetcache
from fleetcache.common import config, rpc
from fleetcache.common.db import migration
from fleetcache.common.db.session import Database

#: Exit status of a command that cannot start because of its configuration.
EXIT_CONFIG = 2
#: What oslo.config 10.7 writes on stderr, then exits 1, for a command-line option (``debug``,
#: ``use_syslog``...) that a configuration file gives a value of the wrong type (see :func:`_load`).
_CLI_VALUE_ERROR = re.compile(
    r"argument --(?P<dest>\w+): Invalid (?P<type>.+) value: (?P<value>.*)")
#: What oslo.messaging raises for a ``transport_url`` it cannot use (bad syntax, no driver;
#: a port that is not a number too, through :func:`fleetcache.common.rpc.parse_transport_url`).
TRANSPORT_URL_ERRORS = (messaging.InvalidTransportURL, messaging.DriverLoadFailure)
#: The fix a message about an unusable transport URL ends with.
TRANSPORT_URL_FIX = ("give driver://user:password@host:port/virtual_host, e.g. "
                     "rabbit://fleetcache:secret@broker:5672/fleetcache")


def config_error(prog: str, message: str) -> NoReturn:
    """Print ``prog: message`` on stderr and exit with :data:`EXIT_CONFIG`."""
    print(f"{prog}: {message}", file=sys.stderr)
    sys.exit(EXIT_CONFIG)


def parse_config(
    argv: Sequence[str] | None,
    prog: str,
    conf: cfg.ConfigOpts | None = None,
    defaults: dict[str, Any] | None = None,
    cli_opts: Sequence[cfg.Opt] = (),
) -> cfg.ConfigOpts:
    """Register every option, parse ``argv`` and the configuration files, check every value,
    and set up oslo.log. Exits with a one-line message on any configuration error.

    :param argv: the arguments after the program name (``None``: ``sys.argv[1:]``).
    :param conf: default the global ``cfg.CONF`` (oslo.privsep reads only that one).
    :param defaults: ``[DEFAULT]`` option defaults of this daemon, overridable in the files.
    """
    conf = cfg.CONF if conf is None else conf
    config.register_all(conf)
    rpc.register_opts(conf)
    log.register_options(conf)
    # stevedore.named warns about a driver name it cannot find; the command says it itself.
    log.set_defaults(default_log_levels=log.get_default_log_levels()
                     + ["alembic=WARN", "stevedore.named=ERROR"])
    if cli_opts:
        conf.register_cli_opts(list(cli_opts))
    for name, value in (defaults or {}).items():
        conf.set_default(name, value)
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        _load(conf, args, prog)
        check_values(conf)
    except cfg.Error as exc:
        config_error(prog, f"configuration error: {exc}")
    except (OSError, UnicodeDecodeError) as exc:
        config_error(prog, unreadable_config(args, prog, exc))
    _setup_logging(conf, prog)
    return conf


def _load(conf: cfg.ConfigOpts, args: Sequence[str], prog: str) -> None:
    """Parse the command line ``args`` and the configuration files into ``conf``.

    NOTE: oslo.config 10.7 does not raise for a command-line option that a file gives a value
    of the wrong type (``debug = maybe``): ``ConfigOpts._validate_cli_options`` writes
    ``argument --debug: Invalid Boolean value: maybe`` on stderr and exits 1, naming neither
    the command nor the group. What it writes is held back while it parses, so that this case
    becomes a ``cfg.Error`` like any other bad value; anything else written is passed on.

    :raises cfg.Error: also for that case.
    """
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            conf(list(args), project="fleetcache", prog=prog, version=fleetcache.__version__)
    except SystemExit:
        *before, last = held.getvalue().splitlines() or [""]
        bad = _CLI_VALUE_ERROR.fullmatch(last)
        if bad is None:
            raise
        held = io.StringIO("".join(f"{line}\n" for line in before))  # the last line: below
        where = f"[DEFAULT] {bad['dest']}" if bad["dest"] in list(conf) else f"--{bad['dest']}"
        raise cfg.Error(f"invalid value for option {where}: {bad['value']!r} is not a valid "
                        f"{bad['type']} value") from None
    finally:
        sys.stderr.write(held.getvalue())


def _setup_logging(conf: cfg.ConfigOpts, prog: str) -> None:
    """Set up oslo.log from ``conf``. Exits with one line when the log file cannot be opened
    (``log_file``, ``log_dir``), ``log_config_append`` cannot be loaded, or a log destination
    cannot be used (``syslog_log_facility``, ``use_journal``: :func:`_log_destination_error`)."""
    try:
        log.setup(conf, "fleetcache", version=fleetcache.__version__)
    except (TypeError, RuntimeError) as exc:
        message = _log_destination_error(conf, exc)
        if message is None:
            raise  # not one of the two known configuration problems: a bug, shown as one
        config_error(prog, message)
    except log.LogConfigError as exc:
        config_error(prog, f"cannot load the logging configuration {exc.log_config} ([DEFAULT] "
                     f"log_config_append): {exc.err_msg}; fix the file or unset the option")
    except OSError as exc:
        if exc.filename is None:
            config_error(prog, f"cannot set up logging: {exc}; check the [DEFAULT] logging "
                         "options (log_file, log_dir, use_syslog, use_journal)")
        config_error(prog, f"cannot open the log file {exc.filename} ([DEFAULT] log_file, "
                     f"log_dir): {exc.strerror or exc}; create its directory, let this user "
                     "write there, or set another path")


def _log_destination_error(conf: cfg.ConfigOpts, exc: Exception) -> str | None:
    """The message for what oslo.log 8.3 raises, as bare built-in exceptions, for a log
    destination it cannot use; ``None`` for anything else.

    ``log.setup`` raises ``TypeError`` (``_find_facility``) for a ``syslog_log_facility`` that
    is not a facility, read with ``use_syslog`` or ``use_journal``, and ``RuntimeError``
    (``handlers.OSJournalHandler``) for ``use_journal`` when the ``systemd.journal`` bindings
    are not installed. Neither names the option, so both are told apart here by the
    configuration and by the import oslo.log tries (``from systemd import journal``).
    """
    if isinstance(exc, TypeError) and (conf.use_syslog or conf.use_journal):
        return (f"invalid value for option [DEFAULT] syslog_log_facility: "
                f"{conf.syslog_log_facility!r}: {exc}; set one of these (the LOG_ prefix may be "
                "left out: local0)")
    if isinstance(exc, RuntimeError) and conf.use_journal and not _journal_installed():
        return ("cannot log to the systemd journal ([DEFAULT] use_journal): its Python "
                "bindings (systemd.journal) are not installed; install them (Debian: "
                "python3-systemd, pip: systemd-python) or set use_journal = false")
    return None


def _journal_installed() -> bool:
    try:
        importlib.import_module("systemd.journal")
    except ImportError:
        return False
    return True


def unreadable_config(args: Sequence[str], prog: str, exc: OSError | UnicodeDecodeError) -> str:
    """The message for a configuration file oslo.config could not read, naming the file.

    oslo.config raises the bare ``OSError`` or ``UnicodeDecodeError`` of ``open``/``read``
    (without the file's name for the latter), so the candidates are read again to find it.
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config-file", action="append", default=[])
    parser.add_argument("--config-dir", action="append", default=[])
    known, _ = parser.parse_known_args(list(args))
    files = list(known.config_file) or cfg.find_config_files(project="fleetcache", prog=prog)
    for directory in known.config_dir or cfg.find_config_dirs(project="fleetcache", prog=prog):
        files += sorted(glob.glob(os.path.join(directory, "*.conf")))
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                f.read()
        except OSError as error:
            return (f"cannot read the configuration file {path}: {error.strerror or error}; "
                    "give a readable file (--config-file)")
        except UnicodeDecodeError as error:
            return (f"the configuration file {path} is not UTF-8 text ({error.reason} at byte "
                    f"{error.start}); give an oslo.config INI file (--config-file)")
    return f"cannot read the configuration files: {exc}"


def check_values(conf: cfg.ConfigOpts) -> None:
    """Read every registered option once, so that a bad value in a file fails now.

    oslo.config converts values lazily, on first use; a typo would otherwise surface minutes
    later, in a thread.

    :raises cfg.Error: naming the first option whose value is invalid.
    """
    for name in list(conf):
        _check(conf, None, name)
        value = getattr(conf, name, None)
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt_name in list(value):
                _check(value, name, opt_name)


def _check(namespace: Any, group: str | None, name: str) -> None:
    try:
        getattr(namespace, name)
    except (cfg.ConfigFileValueError, ValueError) as exc:
        reason = str(exc).rpartition(" is not valid: ")[2]
        where = f"[{group or 'DEFAULT'}] {name}"
        raise cfg.Error(f"invalid value for option {where}: {reason}") from exc


def open_database(conf: cfg.ConfigOpts, prog: str, check_schema: bool = True) -> Database:
    """Connect to ``[database] connection`` and check that its schema is current.

    Exits with one line saying what to do: status :data:`EXIT_CONFIG` when the URL does not
    parse or names a driver that is not installed, status 1 when the database cannot be
    reached or (with ``check_schema``) is not at the newest schema revision.
    """
    try:
        db = Database.from_conf(conf)
    except ImportError as exc:
        config_error(prog, f"invalid value for option [database] connection "
                     f"{redact_db_url(conf.database.connection)}: its driver is not installed "
                     f"({exc}); install it, or name an installed one "
                     "(postgresql+psycopg2://, mysql+pymysql://, sqlite://)")
    except sqlalchemy.exc.ArgumentError as exc:
        config_error(prog, f"invalid value for option [database] connection: {exc}; give a "
                     "SQLAlchemy URL (postgresql+psycopg2://, mysql+pymysql://, sqlite://)")
    try:
        current = migration.db_version(db)
        head = migration.head_revision() if check_schema else current
    except sqlalchemy.exc.SQLAlchemyError as exc:
        db.dispose()
        reason = " ".join(str(getattr(exc, "orig", None) or exc).split())
        print(f"{prog}: cannot use the database {redact_db_url(db.url)}: {reason}; check "
              "[database] connection and that the server is up", file=sys.stderr)
        sys.exit(1)
    if current != head:
        db.dispose()
        print(f"{prog}: the database {redact_db_url(db.url)} is at schema revision {current}, "
              f"not {head}; run 'fleetcache-manage db sync'", file=sys.stderr)
        sys.exit(1)
    return db


def redact_db_url(url: str) -> str:
    """The URL with its password hidden, for messages (a URL that does not parse: its
    scheme only)."""
    try:
        return str(sqlalchemy.engine.make_url(url).render_as_string(hide_password=True))
    except sqlalchemy.exc.ArgumentError:
        return url.partition(":")[0] + ":..."


def check_transport_url(conf: cfg.ConfigOpts, prog: str) -> None:
    """:func:`check_transports` on transports of its own, closed after, for a command that
    otherwise would first use them at its first request."""
    transports = rpc.Transports(conf)
    try:
        check_transports(transports, prog)
    finally:
        transports.cleanup()


def check_transports(
    transports: rpc.Transports, prog: str, notifications: bool = True
) -> None:
    """Open the service's transport of ``[DEFAULT] transport_url`` and, with
    ``notifications``, its notifications' transport (drivers loaded, no connection made; they
    stay open for the service). Exits with one line naming the option whose URL does not
    parse or names no installed driver."""
    for notification in (False, True) if notifications else (False,):
        try:
            if notification:
                transports.notification()
            else:
                transports.get()
        except TRANSPORT_URL_ERRORS as exc:
            option = rpc.transport_url_option(transports.conf, notification)
            config_error(prog, f"invalid value for option {option}: {exc}; {TRANSPORT_URL_FIX}")
