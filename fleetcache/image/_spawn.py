"""Running one external command for :mod:`fleetcache.image.qemu`: exit status, CPU, output.

``posix_spawnp`` (vfork + exec: no copy of this process's page tables, no Python code between
fork and exec, safe with threads) and ``wait4``, which also returns the child's CPU time, so a
kill at the CPU limit can be told from any other kill. Output goes to anonymous temporary
files (not pipes, so ``prlimit --fsize`` bounds it), read back bounded. The environment gets
``LC_ALL=C``, so the messages parsed here are in English.

A wall-clock ``timeout`` is watched through a pidfd (``poll`` wakes when the child exits, so
a command that ends early is not waited for longer); at the deadline the child's whole process
group is killed with SIGKILL. Each command runs in a process group of its own for that, so
whatever it started dies with it, and nothing else does. A killed command that does not die
within :data:`KILL_GRACE` is reaped by a thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import tempfile
import threading
from typing import IO

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: At most this much of stdout is read back (qemu.OUTPUT_LIMIT bounds limited commands).
STDOUT_MAX = 64 * 1024 * 1024
#: The tail of stderr kept for error messages.
STDERR_TAIL = 8192
#: Seconds a command killed at its timeout may take to die. A process in uninterruptible I/O
#: (a hung disk or NFS server) dies only when that I/O returns: after this long it is left to
#: a thread to reap, so that the caller gets its error and its locks back.
KILL_GRACE = 5.0


@dataclasses.dataclass(frozen=True)
class Completed:
    """How a command ended.

    :ivar returncode: the exit code, or ``-N`` when signal ``N`` killed it.
    :ivar signal: the name of that signal (``SIGKILL``), else ``None``.
    :ivar cpu_seconds: user + system CPU the command (and its children) used.
    :ivar stdout: its output (decoded, errors replaced).
    :ivar stderr: the last :data:`STDERR_TAIL` bytes of its error output.
    :ivar timed_out: whether it was still running at the ``timeout`` (and so was killed, unless
        it exited in the same instant: ``returncode`` tells).
    """

    returncode: int
    signal: str | None
    cpu_seconds: float
    stdout: str
    stderr: str
    timed_out: bool = False

    def last_error_line(self) -> str:
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def _kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (its leader not reaped yet, so the id is ours)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _exits_within(pid: int, timeout: float) -> bool:
    """Whether child ``pid`` exits within ``timeout`` seconds (it is not reaped)."""
    fd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout * 1000))))
    finally:
        os.close(fd)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.wait4(pid, 0)


def _wait(pid: int, timeout: float | None) -> tuple[int, float, bool]:
    """``(returncode, cpu seconds, timed out)`` of child ``pid``, killed at ``timeout``."""
    timed_out = False
    try:
        if timeout is not None and not _exits_within(pid, timeout):
            timed_out = True
            _kill_group(pid)
            if not _exits_within(pid, KILL_GRACE):
                LOG.warning("Process %d is still alive %.0f s after SIGKILL (uninterruptible "
                            "I/O?); it is reaped when it exits", pid, KILL_GRACE)
                threading.Thread(target=_reap, args=(pid,), name=f"reap-{pid}",
                                 daemon=True).start()
                return -signal.SIGKILL, 0.0, True
        _, status, usage = os.wait4(pid, 0)
    except BaseException:  # interrupted: do not leave the child running
        _kill_group(pid)
        os.wait4(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, timed_out


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read(f: IO[bytes], tail: int | None = None, limit: int = STDOUT_MAX) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - tail) if tail is not None else 0)
    return f.read(limit).decode("utf-8", "replace")


def spawn(argv: list[str], timeout: float | None = None) -> Completed:
    """Run ``argv`` (``argv[0]`` looked up in ``PATH``), stdin from ``/dev/null``.

    :param timeout: seconds of wall-clock time; at the deadline the command's process group is
        killed and the result says ``timed_out``. ``None``: wait as long as it runs.
    :raises OSError: when it cannot be started (not found, not executable).
    """
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            open(os.devnull, "rb") as null:
        actions = [(os.POSIX_SPAWN_DUP2, null.fileno(), 0),
                   (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                   (os.POSIX_SPAWN_DUP2, err.fileno(), 2)]
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions, setpgroup=0)
        returncode, cpu, timed_out = _wait(pid, timeout)
        name = _signal_name(-returncode) if returncode < 0 else None
        return Completed(returncode=returncode, signal=name, cpu_seconds=cpu,
                         stdout=_read(out), stderr=_read(err, tail=STDERR_TAIL),
                         timed_out=timed_out)
