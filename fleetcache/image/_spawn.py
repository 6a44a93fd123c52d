"""Running one external command for :mod:`fleetcache.image.qemu`: exit status, CPU, output.

``posix_spawnp`` (vfork + exec: no copy of this process's page tables, no Python code between
fork and exec, safe with threads) and ``wait4``, which also returns the child's CPU time, so a
kill at the CPU limit can be told from any other kill. Output goes to anonymous temporary
files (not pipes, so ``prlimit --fsize`` bounds it), read back bounded. The environment gets
``LC_ALL=C``, so the messages parsed here are in English.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import tempfile
from typing import IO

#: At most this much of stdout is read back (qemu.OUTPUT_LIMIT bounds limited commands).
STDOUT_MAX = 64 * 1024 * 1024
#: The tail of stderr kept for error messages.
STDERR_TAIL = 8192


@dataclasses.dataclass(frozen=True)
class Completed:
    """How a command ended.

    :ivar returncode: the exit code, or ``-N`` when signal ``N`` killed it.
    :ivar signal: the name of that signal (``SIGKILL``), else ``None``.
    :ivar cpu_seconds: user + system CPU the command (and its children) used.
    :ivar stdout: its output (decoded, errors replaced).
    :ivar stderr: the last :data:`STDERR_TAIL` bytes of its error output.
    """

    returncode: int
    signal: str | None
    cpu_seconds: float
    stdout: str
    stderr: str

    def last_error_line(self) -> str:
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def _wait(pid: int) -> tuple[int, float]:
    try:
        _, status, usage = os.wait4(pid, 0)
    except BaseException:  # interrupted: do not leave the child running
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.wait4(pid, 0)
        raise
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read(f: IO[bytes], tail: int | None = None, limit: int = STDOUT_MAX) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - tail) if tail is not None else 0)
    return f.read(limit).decode("utf-8", "replace")


def spawn(argv: list[str]) -> Completed:
    """Run ``argv`` (``argv[0]`` looked up in ``PATH``), stdin from ``/dev/null``.

    :raises OSError: when it cannot be started (not found, not executable).
    """
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            open(os.devnull, "rb") as null:
        actions = [(os.POSIX_SPAWN_DUP2, null.fileno(), 0),
                   (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                   (os.POSIX_SPAWN_DUP2, err.fileno(), 2)]
        pid = os.posix_spawnp(argv[0], argv, env, file_actions=actions)
        returncode, cpu = _wait(pid)
        name = _signal_name(-returncode) if returncode < 0 else None
        return Completed(returncode=returncode, signal=name, cpu_seconds=cpu,
                         stdout=_read(out), stderr=_read(err, tail=STDERR_TAIL))
