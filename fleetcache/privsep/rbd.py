"""The privileged ``rbd export`` of one Glance image snapshot into a FIFO in ``_base``.

:func:`export_to_fifo` is the context's only entrypoint, and the compute names only what a
request decides: the pool, image and snapshot of the Glance location, and the FIFO it reads.
Everything else comes from the daemon's *own* configuration (:func:`configured_settings`:
the Ceph user, ``ceph.conf``, keyring and timeouts through the compute's own
:class:`~fleetcache.common.rbd_settings.RbdSettings`, and the ``_base`` directory through
:func:`~fleetcache.common.cache_dir.cache_dir`), so a compromised compute cannot name another
user, keyring or ``ceph.conf`` (one it wrote, with ``keyring =`` or ``log_file =`` in it).

It trusts nothing it is given: the names must match :data:`NAME`, and the destination must be
a FIFO named like a download under way (``.<sha1>.part-…``) directly inside the configured
base directory, and still a FIFO once opened (:func:`open_fifo`). The configured values are
checked as well (absolute regular files, a symlink-free directory, whole seconds), so that a
bad configuration is refused with its name. It then runs ``rbd`` (no shell; each value bound
to its option as ``--opt=value``, so nothing can become an option) with explicit ``--conf``,
``--id`` and ``--keyring``, Ceph's client timeouts, and an overall time limit after which the
export's process group is killed. The bytes go to the FIFO, where the compute verifies and
writes them (the same one-pass pipeline as an HTTP download), so this side never writes a
file.

Which pools and images a compute may have exported is decided by Ceph, not here: the checks
keep the names to Ceph's characters, and the configured user's caps (``osd 'profile
rbd-read-only pool=images'`` in ``docs/ceph.md``) are what limit the export to Glance's pool,
read-only. A compute can ask for any image those caps let the user read.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import re
import shutil
import signal
import stat
import subprocess

from oslo_config import cfg

from fleetcache.common import config
from fleetcache.common.cache_dir import cache_dir
from fleetcache.common.rbd_settings import RbdSettings
from fleetcache.privsep import compute_ctx

#: A pool, image, snapshot or user name (see ``fleetcache.image.rbd_location``).
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")
#: A download under way in ``_base``: ``.<sha1 of the image id>.part-<token>``.
PARTIAL = re.compile(r"\.[0-9a-f]{40}\.part-[A-Za-z0-9_-]{1,64}")
#: Bytes of ``rbd``'s stderr kept for the error, and how many of its own ``rbd:`` lines.
STDERR_KEPT = 2000
STDERR_LINES = 3


class RbdExportError(Exception):
    """The export was refused or failed; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class ExportSettings:
    """What an export runs with besides the request: never the caller's to choose."""

    #: The Ceph user, ``ceph.conf``, keyring and timeouts.
    rbd: RbdSettings
    #: The only directory the destination FIFO may be in (``_base``).
    base_dir: str


def configured_settings(conf: cfg.ConfigOpts) -> ExportSettings:
    """The settings ``conf`` names, resolved by the code the compute resolves its own with.

    In the daemon ``conf`` is the global ``cfg.CONF``: oslo.privsep's ``privsep-helper``
    parses the configuration files on its command line into it
    (:func:`fleetcache.privsep.helper_command` gives it the compute's), but registers none of
    fleetcache's options; they are registered here first (idempotent, and oslo.config reads
    the values of options registered after parsing from the parsed files).

    :raises RbdExportError: ``conf`` does not allow direct downloads from rbd.
    """
    config.register_all(conf)
    rbd = RbdSettings.from_conf(conf)
    if rbd is None:
        raise RbdExportError("refused: the privsep daemon's configuration does not allow "
                             "direct downloads from rbd ([glance] allowed_direct_url_schemes)")
    return ExportSettings(rbd=rbd, base_dir=cache_dir(conf))


def check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or NAME.fullmatch(value) is None:
        raise RbdExportError(f"refused: {what} {value!r} is not a valid Ceph name")
    return value


def check_file(what: str, value: object) -> str:
    """An absolute path of an existing regular file (symlinks resolved, as Ceph would)."""
    if not isinstance(value, str) or not os.path.isabs(value) or "\0" in value:
        raise RbdExportError(f"refused: {what} {value!r} is not an absolute path")
    if not os.path.isfile(value):
        raise RbdExportError(f"refused: {what} {value!r} is not a regular file")
    return value


def check_base_dir(value: object) -> str:
    """An absolute directory whose path has no symlink, ``..`` or ``.`` in it."""
    if not isinstance(value, str) or not os.path.isabs(value) or "\0" in value:
        raise RbdExportError(f"refused: base directory {value!r} is not an absolute path")
    if os.path.normpath(value) != value or os.path.realpath(value) != value:
        raise RbdExportError(f"refused: base directory {value!r} is not a canonical path "
                             "(symlink, '..' or '.')")
    if not os.path.isdir(value):
        raise RbdExportError(f"refused: base directory {value!r} is not a directory")
    return value


def check_destination(base_dir: str, value: object) -> str:
    """A FIFO named like a download under way, directly inside ``base_dir``."""
    if not isinstance(value, str) or "\0" in value:
        raise RbdExportError(f"refused: destination {value!r} is not a path")
    name = os.path.basename(value)
    if os.path.dirname(value) != base_dir or PARTIAL.fullmatch(name) is None:
        raise RbdExportError(f"refused: destination {value!r} is not a temporary name "
                             f"(.<sha1>.part-<token>) directly inside {base_dir}")
    try:
        st = os.lstat(value)
    except OSError as exc:
        raise RbdExportError(f"refused: destination {value!r}: {exc.strerror}") from exc
    if not stat.S_ISFIFO(st.st_mode):
        raise RbdExportError(f"refused: destination {value!r} is not a FIFO")
    return value


def open_fifo(path: str) -> int:
    """Open the FIFO ``path`` for writing; :returns: its descriptor, blocking.

    :func:`check_destination` looked at the path, but the compute owns ``_base`` and can
    replace the FIFO between that look and this open: ``O_NOFOLLOW`` refuses a symlink put
    there, and :func:`check_fifo_fd` on the opened descriptor anything else that is not a FIFO
    (a regular file is opened without ``O_TRUNC`` and closed unwritten).

    :raises RbdExportError: no reader (the compute opens its end first, non-blocking, so
        this never waits), another open error, or not a FIFO.
    """
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        reason = "no reader" if exc.errno == errno.ENXIO else exc.strerror
        raise RbdExportError(f"cannot open {path}: {reason}") from exc
    try:
        check_fifo_fd(path, fd)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_fifo_fd(path: str, fd: int) -> None:
    """:raises RbdExportError: what ``fd`` (opened as ``path``) refers to is not a FIFO."""
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        raise RbdExportError(f"refused: destination {path!r} is not a FIFO once opened "
                             "(replaced after it was checked)")


def check_seconds(what: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= 7 * 86400:
        raise RbdExportError(f"refused: {what} {value!r} is not a number of seconds")
    return value


def export_command(rbd: str, pool: str, image: str, snapshot: str, user: str,
                   ceph_conf: str, keyring: str, connect_timeout: int,
                   osd_op_timeout: int) -> list[str]:
    """The ``rbd export`` argv, every value bound to its option, the data to stdout."""
    return [
        rbd, f"--conf={ceph_conf}", f"--id={user}", f"--keyring={keyring}",
        f"--client-mount-timeout={connect_timeout}",
        f"--rados-mon-op-timeout={connect_timeout}",
        f"--rados-osd-op-timeout={osd_op_timeout}",
        "export", "--no-progress", f"--pool={pool}", f"--image={image}",
        f"--snap={snapshot}", "--path=-",
    ]


def run_export(settings: ExportSettings, pool: object, image: object, snapshot: object,
               destination: object) -> int:
    """Check every argument and setting, then stream the export into ``destination`` (the
    body of :func:`export_to_fifo`, callable without a daemon so that its refusals can be
    tested; the daemon passes :func:`configured_settings`).

    :returns: 0 (the export succeeded).
    :raises RbdExportError: a refused argument or setting, a destination that is not a FIFO
        once opened, no reader on the FIFO, ``rbd`` missing, the time limit passed (the
        export is killed), or ``rbd`` failed (its stderr; a permission error starts with
        ``permission denied``).
    """
    pool = check_name("pool", pool)
    image = check_name("image", image)
    snapshot = check_name("snapshot", snapshot)
    user = check_name("user", settings.rbd.user)
    ceph_conf = check_file("ceph conf", settings.rbd.ceph_conf)
    keyring = check_file("keyring", settings.rbd.keyring)
    base = check_base_dir(settings.base_dir)
    dest = check_destination(base, destination)
    connect = check_seconds("connect timeout", settings.rbd.connect_timeout)
    osd_op = check_seconds("osd op timeout", settings.rbd.osd_op_timeout)
    limit = check_seconds("time limit", settings.rbd.export_timeout)
    rbd = shutil.which("rbd")
    if rbd is None:
        raise RbdExportError("the rbd command is not installed")
    fd = open_fifo(dest)
    try:
        argv = export_command(rbd, pool, image, snapshot, user, ceph_conf, keyring,
                              connect, osd_op)
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fd,  # noqa: S603 - checked
                                stderr=subprocess.PIPE, start_new_session=True,
                                close_fds=True)
    finally:
        os.close(fd)
    try:
        _, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RbdExportError(f"rbd export of {pool}/{image}@{snapshot} killed after the "
                             f"time limit of {limit} s") from None
    if proc.returncode != 0:
        text = _summary(err.decode("utf-8", "replace"))
        if proc.returncode < 0:
            detail = f"killed by signal {-proc.returncode}"
        else:
            detail = f"exited {proc.returncode}"
        prefix = "permission denied: " if _denied(text) else ""
        raise RbdExportError(f"{prefix}rbd export of {pool}/{image}@{snapshot} {detail}: "
                             f"{text}")
    return 0


def _summary(stderr: str) -> str:
    """The ``rbd:`` lines of the CLI's stderr (its own verdicts; librados' timestamped log
    lines repeat them), the last few, else the end of stderr."""
    own = [line.strip() for line in stderr.splitlines() if line.startswith("rbd:")]
    text = "; ".join(dict.fromkeys(own[-STDERR_LINES:])) if own else stderr.strip()
    return text[-STDERR_KEPT:]


def _denied(stderr: str) -> bool:
    return "(1) Operation not permitted" in stderr or "(13) Permission denied" in stderr


@compute_ctx.entrypoint
def export_to_fifo(pool: str, image: str, snapshot: str, destination: str) -> int:
    """``rbd export <pool>/<image>@<snapshot>`` into the FIFO ``destination``, in the privsep
    daemon, with the Ceph user, files, timeouts and base directory of the daemon's own
    configuration (:func:`configured_settings` of the global ``cfg.CONF``, which oslo.privsep
    fills from the helper's command line). See :func:`run_export` for the checks and errors.
    """
    return run_export(configured_settings(cfg.CONF), pool, image, snapshot, destination)
