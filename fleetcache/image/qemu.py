"""The only place fleetcache runs ``qemu-img``.

Every call is an argument list (never a shell string), always names the input format with
``-f`` (never lets qemu-img probe), and takes absolute paths only, so that no file name can be
read as an option or as a ``protocol:`` / ``json:`` pseudo-file. ``info`` is meant for untrusted
images and runs under CPU-time and address-space limits (Nova's ``QEMU_IMG_LIMITS`` pattern);
callers must run the format inspector first (see :mod:`fleetcache.image.format_safety`).
"""

from __future__ import annotations

import json
import os
from typing import Any

from oslo_concurrency import processutils
from oslo_utils import units

from fleetcache.common import exception

QEMU_IMG = "qemu-img"

#: Format names whose qemu-img driver has another name (inspector/Glance name -> driver).
_DRIVER_NAMES = {"vhd": "vpc", "iso": "raw", "gpt": "raw", "ami": "raw", "aki": "raw", "ari": "raw"}


def driver_name(fmt: str) -> str:
    """The qemu-img ``-f``/``-O``/``-F`` value for a Glance or inspector format name."""
    return _DRIVER_NAMES.get(fmt, fmt)


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"qemu-img paths must be absolute, got {path!r}")
    return path


def _run(
    action: str,
    cmd: list[str],
    limits: processutils.ProcessLimits | None = None,
    ok_codes: tuple[int, ...] = (0,),
) -> str:
    try:
        out, _err = processutils.execute(*cmd, prlimit=limits, check_exit_code=list(ok_codes))
    except processutils.ProcessExecutionError as exc:
        detail = (exc.stderr or exc.stdout or "").strip().splitlines()
        reason = detail[-1] if detail else f"exit code {exc.exit_code}"
        raise exception.QemuImgError(action=action, reason=reason) from exc
    except OSError as exc:  # qemu-img missing or not executable
        raise exception.QemuImgError(action=action, reason=str(exc)) from exc
    return str(out)


def _json(action: str, out: str) -> dict[str, Any]:
    try:
        data = json.loads(out)
    except ValueError as exc:
        raise exception.QemuImgError(action=action, reason="output is not JSON") from exc
    if not isinstance(data, dict):
        raise exception.QemuImgError(action=action, reason="output is not a JSON object")
    return data


def _limits(cpu_time_s: int, address_space_gib: int) -> processutils.ProcessLimits:
    return processutils.ProcessLimits(
        cpu_time=cpu_time_s, address_space=address_space_gib * units.Gi
    )


def info(
    path: str, fmt: str, *, cpu_time_s: int, address_space_gib: int, force_share: bool = False
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


def check(path: str, fmt: str, *, cpu_time_s: int, address_space_gib: int) -> dict[str, Any]:
    """``qemu-img check --output=json -f <fmt> <path>`` under resource limits.

    Exit codes 2 (corruptions) and 3 (leaked clusters) still return the report, which then
    carries ``corruptions`` / ``leaks`` counts.

    :raises QemuImgError: when the check itself could not run.
    """
    cmd = [QEMU_IMG, "check", "--output=json", "-f", driver_name(fmt), _absolute(path)]
    out = _run("check", cmd, _limits(cpu_time_s, address_space_gib), ok_codes=(0, 2, 3))
    return _json("check", out)


def convert(src: str, src_fmt: str, dst: str, dst_fmt: str = "raw") -> None:
    """``qemu-img convert -f <src_fmt> -O <dst_fmt> <src> <dst>`` (the output stays sparse)."""
    cmd = [QEMU_IMG, "convert", "-f", driver_name(src_fmt), "-O", driver_name(dst_fmt)]
    _run("convert", [*cmd, _absolute(src), _absolute(dst)])


def create_overlay(base: str, base_fmt: str, disk: str, size: int | None = None) -> None:
    """``qemu-img create -f qcow2 -b <base> -F <base_fmt> <disk> [size]``.

    The base's format is named with ``-F`` so qemu never probes it. ``size`` (bytes) may only
    grow the disk beyond the base's virtual size.
    """
    cmd = [QEMU_IMG, "create", "-f", "qcow2", "-b", _absolute(base), "-F", driver_name(base_fmt)]
    cmd.append(_absolute(disk))
    if size is not None:
        cmd.append(str(int(size)))
    _run("create", cmd)
