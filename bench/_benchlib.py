"""Small helpers shared by the benchmarks: the bench broker, process CPU, free ports, output.

Every benchmark prints its headline as its last line, ``NAME: key=value ... ratio=R``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
BROKER_SCRIPT = REPO / "tools" / "rabbitmq-bench-node.sh"
_TICK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    """Progress on stderr, so stdout stays the report."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def exit_on_sigterm() -> None:
    """Make SIGTERM unwind the main thread as Ctrl-C does, so the ``with`` blocks stop what the
    bench started: killed with SIGTERM, a run left its conductor, API and fake computes behind,
    and the next run's API asked that stale conductor on the bench broker's shared topic."""
    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def parse_with_smoke(parser: argparse.ArgumentParser,
                     smoke: dict[str, object]) -> argparse.Namespace:
    """``parser``'s arguments plus ``--smoke``, which puts the tiny ``smoke`` values in place
    of the parsed ones: one quick run that proves the bench still runs (``bench/run.sh
    --smoke``, from ``make test``), its figures printed but not judged."""
    sizes = " ".join(f"--{k.replace('_', '-')} "
                     + (" ".join(map(str, v)) if isinstance(v, list) else str(v))
                     for k, v in smoke.items())
    parser.add_argument("--smoke", action="store_true",
                        help=f"a tiny run ({sizes}) proving the bench runs; no figure judged")
    args = parser.parse_args()
    if args.smoke:
        vars(args).update(smoke)
    return args


def check_and_remove(paths: Sequence[Path], size: int) -> None:
    """Every copy a round wrote must hold ``size`` bytes; each is removed for the next round.

    :raises RuntimeError: naming the first copy of another size.
    """
    for path in paths:
        if path.stat().st_size != size:
            raise RuntimeError(f"{path} has {path.stat().st_size} bytes")
        path.unlink()


def headline(name: str, ratio: float, **values: object) -> str:
    fields = " ".join(f"{k}={_fmt(v)}" for k, v in values.items())
    return f"{name}: {fields} ratio={ratio:.3f}"


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def loadavg() -> str:
    """The 1-minute load average: what else was running shows here."""
    return f"{os.getloadavg()[0]:.1f}"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far, all its threads, dead ones included."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15.
    return (int(fields[11]) + int(fields[12])) / _TICK


def cpu_with_reaped(pid: int) -> float:
    """:func:`cpu_seconds` of ``pid`` plus what its children that it reaped used (the privsep
    daemon's ``rbd export`` processes)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # cutime and cstime are fields 16 and 17.
    return sum(int(f) for f in fields[11:15]) / _TICK


def stack_pids(stack_dir: str | Path) -> dict[str, int]:
    """The pids of the local stack's Glance (gunicorn master) and Ceph OSD, from their pid
    files (``tools/stack.sh``, ``tools/ceph.sh``); those not running are left out."""
    files = {"glance": Path(stack_dir) / "run" / "glance.pid",
             "ceph-osd": Path(stack_dir) / "ceph" / "run" / "ceph-osd.0.pid"}
    pids = {}
    for name, path in files.items():
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if os.path.exists(f"/proc/{pid}"):
            pids[name] = pid
    return pids


def tree_cpu(pid: int) -> float:
    """:func:`cpu_seconds` of ``pid`` and its live descendants (gunicorn's workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            total += cpu_seconds(current)
        except OSError:
            continue
        todo.extend(children.get(current, []))
    return total


def broker_pid() -> int | None:
    """The bench RabbitMQ node's pid (its pid file), if it runs."""
    try:
        return int((Path("/var/tmp/fcbench-rabbitmq") / "node.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections (or ``proc`` dies)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def broker_start(vhosts: Sequence[str]) -> str:
    """Start the private bench RabbitMQ node (port 5674) with ``vhosts``; return its base URL."""
    out = subprocess.run(
        [str(BROKER_SCRIPT), "start", *vhosts], check=True, capture_output=True, text=True
    )
    return out.stdout.strip().splitlines()[-1]


def broker_stop() -> None:
    subprocess.run([str(BROKER_SCRIPT), "stop"], check=True)


def broker_fd_limit() -> str:
    """The bench node's own account of its file-descriptor and socket limits."""
    out = subprocess.run(
        [str(BROKER_SCRIPT), "ctl", "status"], check=False, capture_output=True, text=True
    ).stdout
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if "File Descriptors" in line:
            return " ".join(x.strip() for x in lines[i + 1:i + 4] if x.strip())
    return "unknown"


def terminate(procs: Sequence[subprocess.Popen[bytes]], timeout: float = 10) -> None:
    """SIGTERM each process (then SIGKILL the ones still alive after ``timeout``)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
