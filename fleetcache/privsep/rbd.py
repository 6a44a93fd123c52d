"""The privileged ``rbd export`` of one Glance image snapshot into a FIFO in ``_base``.

:func:`export_to_fifo` is the context's only entrypoint. It trusts nothing it is given: the
names must match :data:`NAME`, the Ceph files must be absolute paths of regular files, the base
directory must be an absolute, symlink-free directory, and the destination must be a FIFO
named like a download under way (``.<sha1>.part-…``) directly inside it. It then runs ``rbd``
(no shell; each value bound to its option as ``--opt=value``, so nothing can become an option)
with explicit ``--conf``, ``--id`` and ``--keyring``, Ceph's client timeouts, and an overall
time limit after which the export's process group is killed. The bytes go to the FIFO, where
the compute verifies and writes them (the same one-pass pipeline as an HTTP download), so
this side never writes a file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import signal
import stat
import subprocess

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


def run_export(pool: object, image: object, snapshot: object, user: object,
               ceph_conf: object, keyring: object, base_dir: object, destination: object,
               connect_timeout: object, osd_op_timeout: object, time_limit: object) -> int:
    """Check every argument, then stream the export into ``destination`` (the body of
    :func:`export_to_fifo`, callable without a daemon so that its refusals can be tested).

    :returns: 0 (the export succeeded).
    :raises RbdExportError: a refused argument, no reader on the FIFO, ``rbd`` missing, the
        time limit passed (the export is killed), or ``rbd`` failed (its stderr; a
        permission error starts with ``permission denied``).
    """
    pool = check_name("pool", pool)
    image = check_name("image", image)
    snapshot = check_name("snapshot", snapshot)
    user = check_name("user", user)
    ceph_conf = check_file("ceph conf", ceph_conf)
    keyring = check_file("keyring", keyring)
    base = check_base_dir(base_dir)
    dest = check_destination(base, destination)
    connect = check_seconds("connect timeout", connect_timeout)
    osd_op = check_seconds("osd op timeout", osd_op_timeout)
    limit = check_seconds("time limit", time_limit)
    rbd = shutil.which("rbd")
    if rbd is None:
        raise RbdExportError("the rbd command is not installed")
    try:
        # The reader opened first (non-blocking), so this never waits; ENXIO: no reader.
        fd = os.open(dest, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        reason = "no reader" if exc.errno == errno.ENXIO else exc.strerror
        raise RbdExportError(f"cannot open {dest}: {reason}") from exc
    try:
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
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
def export_to_fifo(pool: str, image: str, snapshot: str, user: str, ceph_conf: str,
                   keyring: str, base_dir: str, destination: str, connect_timeout: int,
                   osd_op_timeout: int, time_limit: int) -> int:
    """``rbd export <pool>/<image>@<snapshot>`` into the FIFO ``destination`` in the privsep
    daemon (see :func:`run_export` for the checks and errors)."""
    return run_export(pool, image, snapshot, user, ceph_conf, keyring, base_dir, destination,
                      connect_timeout, osd_op_timeout, time_limit)
