"""Shared helpers of the image and compute tests: a private ``ConfigOpts``, a hanging
``qemu-img``."""

from __future__ import annotations

import errno
import os
import pathlib
import shutil
import time
import types
from typing import Any

import pytest
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from fleetcache.common import config
from fleetcache.image import chunks


def make_conf(**overrides: Any) -> cfg.ConfigOpts:
    """A fresh configuration with every fleetcache option; ``group__name=value`` overrides.

    ``group__auth_type`` also registers that keystoneauth plugin's options in the group (as
    loading the plugin would), so that ``group__username=...`` and the like can be given.
    """
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[], default_config_dirs=[])
    for key, value in overrides.items():
        if key.endswith("__auth_type"):
            conf.register_opts(ks_loading.get_auth_plugin_conf_options(value),
                               group=key.rpartition("__")[0])
    for key, value in overrides.items():
        group, _, name = key.rpartition("__")
        conf.set_override(name, value, group=group or None)
    return conf


def hanging_qemu_img(directory: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                     action: str) -> pathlib.Path:
    """Put first on ``PATH`` a ``qemu-img`` whose ``action`` (``convert``, ``create``) writes a
    few bytes to its last argument (the output file; give ``create`` no size) and then hangs,
    in a child ``sleep``, as a process stuck in I/O would (no CPU used). Every other action
    runs the real qemu-img.

    :returns: a file the hanging command writes its child's pid to.
    """
    real = shutil.which("qemu-img")
    assert real is not None, "qemu-img is not installed"
    bindir, pidfile = directory / "fake-bin", directory / "hanging.pid"
    bindir.mkdir()
    script = bindir / "qemu-img"
    script.write_text(f"""#!/bin/sh
if [ "$1" = {action} ]; then
    for last; do :; done
    echo partial > "$last"
    sleep 60 &
    echo $! > {pidfile}
    wait
    exit 0
fi
exec {real} "$@"
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return pidfile


def process_gone(pid: int, within: float = 2.0) -> bool:
    """Whether ``pid`` stops running within ``within`` seconds (a zombie counts as gone).

    SIGKILL is delivered asynchronously: a process killed an instant ago may still show as
    running (seen under load: the check right after ``killpg`` failed about once in 20).
    """
    deadline = time.monotonic() + within
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def buffers_cannot_be_mapped(monkeypatch: pytest.MonkeyPatch, code: int = errno.ENOMEM) -> None:
    """Every download buffer mapped from now on (:func:`~fleetcache.image.chunks.map_buffer`:
    a :class:`~fleetcache.image.chunks.ChunkPool`'s, the ``O_DIRECT`` writer's staging
    buffer) fails with ``code`` (``ENOMEM``: the host is out of memory)."""
    def refused(*args: object) -> object:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(chunks, "mmap", types.SimpleNamespace(mmap=refused))
