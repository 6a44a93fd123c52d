"""The only place fleetcache runs ``qemu-img``.

Every call is an argument list (never a shell string), always names the input format with
``-f`` (never lets qemu-img probe), and takes absolute paths only, so that no file name can be
read as an option or as a ``protocol:`` / ``json:`` pseudo-file. ``info`` and ``check`` are
meant for untrusted images: they run under util-linux ``prlimit`` (``prlimit --cpu=S:S+1
--as=B --fsize=B --core=0 -- qemu-img ...``), so the kernel enforces Nova's ``QEMU_IMG_LIMITS``
(``[libvirt] images_cpu_time_limit``, ``images_address_space_limit``) from qemu-img's first
instruction, as oslo.concurrency's ``prlimit=`` does, without first starting a Python
interpreter to set them (docs/performance.md, "qemu-img under prlimit").
``--fsize`` bounds what they print (a crafted qcow2 makes ``qemu-img check`` print a line per
cluster, gigabytes within the CPU limit) and ``--core=0`` keeps a killed qemu-img from
dumping core. ``convert`` and ``create`` write disks, on trusted (inspected) input, and run
under a wall-clock limit instead (``[libvirt] images_convert_timeout``,
``images_create_timeout``): a command blocked on I/O uses no CPU, and these run while the
caller holds the image's lock and an RPC worker. A limit hit raises
:class:`~fleetcache.common.exception.QemuImgError` naming the limit and its option. Callers
must run the format inspector first (:mod:`fleetcache.image.format_safety`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from oslo_utils import units

from fleetcache.common import exception
from fleetcache.common.disk_formats import RAW_CONTENT_FORMATS
from fleetcache.image._spawn import Completed, spawn

QEMU_IMG = "qemu-img"
PRLIMIT = "prlimit"
#: What a limited ``info``/``check`` may print (a qcow2's 65,536 snapshots fit in 16 MiB).
OUTPUT_LIMIT = 32 * units.Mi
#: ``-t`` values :func:`convert` accepts for its output.
CACHE_MODES = ("none", "writeback", "writethrough", "directsync", "unsafe")

#: Format names whose qemu-img driver has another name (Glance or inspector name -> driver):
#: the formats qemu reads as raw, a partitioned raw disk (the inspector's ``gpt``), and VHD,
#: whose driver is ``vpc`` (Virtual PC, whose disk format VHD is).
_DRIVER_NAMES = {**dict.fromkeys(RAW_CONTENT_FORMATS, "raw"), "gpt": "raw", "vhd": "vpc"}
#: The option that sets each action's wall-clock limit, named when the limit is hit.
TIMEOUT_OPTIONS = {"convert": "[libvirt] images_convert_timeout",
                   "create": "[libvirt] images_create_timeout"}
#: What qemu-img or the loader print when the address space limit stops an allocation.
_MEMORY_ERRORS = ("cannot allocate memory", "failed to allocate", "out of memory",
                  "failed to map segment", "resource temporarily unavailable")


@dataclasses.dataclass(frozen=True)
class ProcessLimits:
    """The kernel limits an untrusted-image command runs under (names as oslo's).

    :ivar cpu_time: seconds of CPU (user + system). The soft limit is this: the kernel sends
        SIGXCPU, which ends qemu-img and which nothing but this limit sends, so the error can
        name the limit; the hard limit one second later SIGKILLs a process that caught it.
        NOTE: oslo.concurrency sets soft = hard (SIGKILL at the limit), and a SIGKILL is not
        the limit's alone: the CPU time ``wait4`` reports for a 1 s limit was 0.91-1.09 s over
        twelve runs on a loaded machine, so a threshold on it named the wrong cause.
    :ivar address_space: bytes of virtual memory.
    """

    cpu_time: int
    address_space: int

    def prefix(self) -> list[str]:
        return [PRLIMIT, f"--cpu={self.cpu_time}:{self.cpu_time + 1}",
                f"--as={self.address_space}", f"--fsize={OUTPUT_LIMIT}", "--core=0", "--"]


def driver_name(fmt: str) -> str:
    """The qemu-img ``-f``/``-O``/``-F`` value for a Glance or inspector format name."""
    return _DRIVER_NAMES.get(fmt, fmt)


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"qemu-img paths must be absolute, got {path!r}")
    return path


def execute(*cmd: str, prlimit: ProcessLimits | None = None,
            timeout: float | None = None) -> Completed:
    """Run ``cmd`` (under ``prlimit`` when given, killed after ``timeout`` seconds when
    given); the seam tests spy on.

    :raises OSError: when the command (or ``prlimit``) cannot be started.
    """
    return spawn([*prlimit.prefix(), *cmd] if prlimit else list(cmd), timeout=timeout)


def _limit_hit(done: Completed, limits: ProcessLimits) -> str | None:
    """Which limit stopped ``done``, as a reason naming its option; None if none did."""
    if done.signal == "SIGXCPU" or (done.signal == "SIGKILL"
                                    and done.cpu_seconds >= limits.cpu_time + 0.5):
        return (f"killed by {done.signal} after {done.cpu_seconds:.1f} s of CPU: over the CPU "
                f"time limit of {limits.cpu_time} s ([libvirt] images_cpu_time_limit)")
    if done.signal == "SIGXFSZ":
        return f"killed by SIGXFSZ: it printed more than {OUTPUT_LIMIT} bytes"
    if any(word in done.stderr.lower() for word in _MEMORY_ERRORS):
        return (f"out of memory under the address space limit of "
                f"{limits.address_space / units.Gi:g} GiB ([libvirt] "
                f"images_address_space_limit): {done.last_error_line()}")
    return None


def _run(action: str, cmd: list[str], limits: ProcessLimits | None = None,
         ok_codes: tuple[int, ...] = (0,), timeout_s: int | None = None) -> str:
    try:
        done = execute(*cmd, prlimit=limits, timeout=timeout_s)
    except OSError as exc:  # qemu-img or prlimit missing or not executable
        raise exception.QemuImgError(action=action, reason=str(exc)) from exc
    if done.returncode in ok_codes:
        return done.stdout
    if done.timed_out:
        raise exception.QemuImgError(
            action=action, reason=f"did not finish within the time limit of {timeout_s} s "
            f"({TIMEOUT_OPTIONS[action]}) and was killed")
    reason = _limit_hit(done, limits) if limits is not None else None
    if reason is None:
        detail = done.last_error_line()
        if done.signal:
            reason = f"killed by {done.signal}" + (f": {detail}" if detail else "")
        else:
            reason = detail or f"exit code {done.returncode}"
    raise exception.QemuImgError(action=action, reason=reason)


def _json(action: str, out: str) -> dict[str, Any]:
    try:
        data = json.loads(out)
    except ValueError as exc:
        raise exception.QemuImgError(action=action, reason="output is not JSON") from exc
    if not isinstance(data, dict):
        raise exception.QemuImgError(action=action, reason="output is not a JSON object")
    return data


def _limits(cpu_time_s: int, address_space_gib: float) -> ProcessLimits:
    return ProcessLimits(cpu_time=cpu_time_s, address_space=int(address_space_gib * units.Gi))


def info(
    path: str, fmt: str, *, cpu_time_s: int, address_space_gib: float, force_share: bool = False
) -> dict[str, Any]:
    """``qemu-img info --output=json -f <fmt> <path>`` under resource limits.

    :param force_share: add ``-U``, to read a disk a running guest holds locked.
    :raises QemuImgError: when qemu-img fails, hits a limit or prints something that is not JSON.
    """
    cmd = [QEMU_IMG, "info", "--output=json", "-f", driver_name(fmt)]
    if force_share:
        cmd.append("-U")
    cmd.append(_absolute(path))
    return _json("info", _run("info", cmd, _limits(cpu_time_s, address_space_gib)))


def check(path: str, fmt: str, *, cpu_time_s: int, address_space_gib: float) -> dict[str, Any]:
    """``qemu-img check --output=json -f <fmt> <path>`` under resource limits.

    Exit codes 2 (corruptions) and 3 (leaked clusters) still return the report, which then
    carries ``corruptions`` / ``leaks`` counts.

    :raises QemuImgError: when the check itself could not run or hit a limit.
    """
    cmd = [QEMU_IMG, "check", "--output=json", "-f", driver_name(fmt), _absolute(path)]
    out = _run("check", cmd, _limits(cpu_time_s, address_space_gib), ok_codes=(0, 2, 3))
    return _json("check", out)


def convert(src: str, src_fmt: str, dst: str, dst_fmt: str = "raw", *, timeout_s: int,
            cache: str | None = None, out_of_order: bool = False) -> None:
    """``qemu-img convert -f <src_fmt> -O <dst_fmt> [-t <cache>] [-W] <src> <dst>``.

    The output stays sparse. With ``cache`` ``none`` (O_DIRECT) or ``writeback`` qemu-img
    flushes the output (fdatasync) before it exits; without it (qemu-img's default for
    convert, ``unsafe``) the data may still be only in the page cache.

    :param timeout_s: wall-clock seconds (``[libvirt] images_convert_timeout``); qemu-img is
        killed after that, and ``dst`` may then hold part of the output: the caller removes it.
    :param out_of_order: ``-W``, let writes land out of order (only for an output nobody
        reads before the command ends).
    :raises QemuImgError: when it fails or hits the time limit.
    """
    cmd = [QEMU_IMG, "convert", "-f", driver_name(src_fmt), "-O", driver_name(dst_fmt)]
    if cache is not None:
        if cache not in CACHE_MODES:
            raise ValueError(f"unknown qemu-img cache mode {cache!r}")
        cmd += ["-t", cache]
    if out_of_order:
        cmd.append("-W")
    _run("convert", [*cmd, _absolute(src), _absolute(dst)], timeout_s=timeout_s)


def create_overlay(base: str, base_fmt: str, disk: str, size: int | None = None, *,
                   timeout_s: int) -> None:
    """``qemu-img create -f qcow2 -b <base> -F <base_fmt> <disk> [size]``.

    The base's format is named with ``-F`` so qemu never probes it. ``size`` (bytes) may only
    grow the disk beyond the base's virtual size.

    :param timeout_s: wall-clock seconds (``[libvirt] images_create_timeout``); qemu-img is
        killed after that, and ``disk`` may then exist, incomplete: the caller removes it.
    :raises QemuImgError: when it fails or hits the time limit.
    """
    cmd = [QEMU_IMG, "create", "-f", "qcow2", "-b", _absolute(base), "-F", driver_name(base_fmt)]
    cmd.append(_absolute(disk))
    if size is not None:
        cmd.append(str(int(size)))
    _run("create", cmd, timeout_s=timeout_s)
