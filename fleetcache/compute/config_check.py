"""Validation of a compute's whole configuration, for ``--check-config`` and for start-up.

:func:`check_config` lists every :class:`Problem`. A missing host tool is a warning when only
checking (``strict=False``: the file may be meant for another host) and an error at real
start-up (``strict=True``), so a compute never starts and then fails at its first instance.
A missing ``qemu-img`` with a backend that does not need it (``flat``, ``raw``) is only a
warning: such a compute accepts raw images and refuses the others at format inspection.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Sequence
from typing import TextIO

from oslo_config import cfg
from oslo_log import log as logging

from fleetcache.common import exception
from fleetcache.common.disk_formats import DISK_FORMATS, INSPECTABLE_FORMATS, RAW_CONTENT_FORMATS
from fleetcache.compute import long_calls
from fleetcache.compute.imagebackend import backends, mapping, selection
from fleetcache.compute.imagecache.disk_floor import Floor
from fleetcache.compute.peers import tls as peer_tls
from fleetcache.image import qemu

LOG = logging.getLogger(__name__)

ERROR = "error"
WARNING = "warning"
_INSPECTOR_VMDK_TYPES = {"streamoptimized", "monolithicsparse"}


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with the configuration: which option, which rule, what to do."""

    severity: str
    option: str
    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.severity.upper()}: {self.option}: {self.message} (rule: {self.rule})"


def _mapping_problems(conf: cfg.ConfigOpts) -> tuple[dict[str, str], list[Problem]]:
    entries, violations = mapping.mapping_violations(conf.libvirt.images_type_mapping)
    return entries, [Problem(ERROR, mapping.OPTION, v.rule, v.message) for v in violations]


def _backend_problems(
    conf: cfg.ConfigOpts, used: dict[str, str], strict: bool, which: backends.Which
) -> list[Problem]:
    problems = []
    for name, option in sorted(used.items()):
        backend = backends.get_backend(name, conf)
        for needed_option, message in backend.config_errors():
            problems.append(Problem(ERROR, needed_option, f"{name} backend options", message))
        missing = backend.missing_tools(which)
        if missing:
            problems.append(
                Problem(
                    ERROR if strict else WARNING,
                    option,
                    "backend tools present",
                    f"backend {name} needs {', '.join(missing)}, not found on this host: "
                    f"install {backends.packages_for(missing)}",
                )
            )
        elif not backend.implemented:
            problems.append(
                Problem(
                    WARNING,
                    option,
                    "backend implemented",
                    f"backend {name} cannot create instance disks in this release",
                )
            )
    return problems


def _qemu_img_problems(conf: cfg.ConfigOpts, which: backends.Which) -> list[Problem]:
    """Without qemu-img only raw content passes format inspection: say so, unless
    ``[compute] image_type_exclude_list`` already excludes every other type."""
    if which(qemu.QEMU_IMG) is not None:
        return []
    others = set(INSPECTABLE_FORMATS) - set(RAW_CONTENT_FORMATS)
    accepted = sorted(others - set(conf.compute.image_type_exclude_list))
    if not accepted:
        return []
    return [
        Problem(
            WARNING,
            "[compute] image_type_exclude_list",
            "qemu-img for images with a header",
            f"qemu-img is not installed: only raw images ({', '.join(RAW_CONTENT_FORMATS)}) "
            f"can be accepted, {', '.join(accepted)} images are refused at format inspection; "
            "install qemu-utils, or exclude those types",
        )
    ]


def _disk_floor_problems(conf: cfg.ConfigOpts) -> list[Problem]:
    """``[image_cache] disk_free_floor`` parses (the compute's start-up parses it too, and
    stops on a bad value)."""
    try:
        Floor.parse(conf.image_cache.disk_free_floor)
    except exception.InvalidConfiguration as exc:
        return [Problem(ERROR, "[image_cache] disk_free_floor", "bytes or a percentage",
                        exc.kwargs.get("reason") or str(exc))]
    return []


def _peer_tls_problems(conf: cfg.ConfigOpts) -> list[Problem]:
    """``[image_cache] peer_ssl_*``: all or none (the image server refuses to start with
    some), and files that load."""
    problem = peer_tls.config_problem(conf)
    if problem is not None:
        return [Problem(ERROR, "[image_cache] peer_ssl_*", "all or none", problem)]
    files = peer_tls.load(conf)
    if files is None:
        return []
    try:
        peer_tls.server_context(files)
    except exception.InvalidConfiguration as exc:
        return [Problem(ERROR, "[image_cache] peer_ssl_*", "PEM files that load",
                        exc.kwargs.get("reason") or str(exc))]
    return []


def _other_problems(conf: cfg.ConfigOpts) -> list[Problem]:
    problems = _disk_floor_problems(conf) + _peer_tls_problems(conf)
    if conf.libvirt.images_type == "rbd" and not conf.force_raw_images:
        problems.append(
            Problem(
                ERROR,
                "[DEFAULT] force_raw_images",
                "rbd needs raw images",
                "must be true when [libvirt] images_type is rbd (as Nova, bug 1816686)",
            )
        )
    ignored = [t for t in conf.compute.vmdk_allowed_types if t.lower() not in _INSPECTOR_VMDK_TYPES]
    if ignored:
        problems.append(
            Problem(
                WARNING,
                "[compute] vmdk_allowed_types",
                "inspector VMDK types",
                f"{', '.join(ignored)} never pass the format inspector's safety check",
            )
        )
    unknown = set(conf.compute.image_type_exclude_list) - set(DISK_FORMATS)
    if unknown:
        problems.append(
            Problem(
                WARNING,
                "[compute] image_type_exclude_list",
                "known image types",
                f"unknown image types {', '.join(sorted(unknown))}",
            )
        )
    return problems


def check_config(
    conf: cfg.ConfigOpts, strict: bool, which: backends.Which = shutil.which
) -> list[Problem]:
    """Every problem of the compute configuration ``conf`` (already parsed).

    :param strict: True at real start-up (missing tools are errors), False for
        ``--check-config`` (missing tools are warnings).
    :param which: looks a command up on ``PATH`` (``shutil.which``; replaceable in tests).
    """
    entries, problems = _mapping_problems(conf)
    used = {selection.default_backend(conf): "[libvirt] images_type"}
    for backend in entries.values():
        used.setdefault(backend, mapping.OPTION)
    problems += _backend_problems(conf, used, strict, which)
    problems += _qemu_img_problems(conf, which)
    problems += _other_problems(conf)
    return problems


def enforce_config(conf: cfg.ConfigOpts, which: backends.Which = shutil.which) -> None:
    """Start-up gate: raise on errors (strict mode), else log the warnings (a compute that
    does not start says only why).

    :raises InvalidConfiguration: listing every error.
    """
    problems = check_config(conf, strict=True, which=which)
    errors = [str(p) for p in problems if p.severity == ERROR]
    if errors:
        raise exception.InvalidConfiguration(reason="; ".join(errors))
    for problem in problems:
        LOG.warning("%s", problem)


def long_call_problems(conf: cfg.ConfigOpts) -> list[Problem]:
    """The long-call limit against the RPC server's workers (:mod:`.long_calls`); ``conf``
    must have oslo.messaging's server options (the daemon's command line registers them)."""
    try:
        long_calls.effective_limit(conf)
    except exception.InvalidConfiguration as exc:
        return [Problem(ERROR, "[DEFAULT] executor_thread_pool_size", "at least 2 on a compute",
                        str(exc))]
    lowered = long_calls.limit_problem(conf)
    if lowered is None:
        return []
    return [Problem(WARNING, "[compute] max_concurrent_long_calls",
                    "below executor_thread_pool_size", lowered)]


def main_check_config(conf: cfg.ConfigOpts, out: TextIO | None = None,
                      extra: Sequence[Problem] = ()) -> int:
    """``fleetcache-compute --check-config``: print problems (``extra`` too); 0 when no
    error, else 1."""
    out = out or sys.stderr
    problems = [*check_config(conf, strict=False), *extra]
    for problem in problems:
        print(problem, file=out)
    errors = sum(p.severity == ERROR for p in problems)
    print(
        f"configuration {'invalid' if errors else 'valid'}: "
        f"{errors} error(s), {len(problems) - errors} warning(s)",
        file=out,
    )
    return 1 if errors else 0
