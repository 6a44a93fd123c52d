"""Unit tests of the direct path from Ceph in the image cache
(fleetcache.compute.imagecache.direct and ImageCache's fallback), with the privileged export
replaced by a function that writes into the FIFO as the privsep daemon's ``rbd`` would."""

from __future__ import annotations

import dataclasses
import errno
import functools
import io
import os
import pathlib
from collections.abc import Callable
from typing import Any

import pytest

from fleetcache.common import exception
from fleetcache.common.context import RequestContext
from fleetcache.common.rbd_settings import RbdSettings
from fleetcache.compute.imagecache import ImageCache, RbdDirect, direct
from fleetcache.compute.imagecache.layout import partial_prefix
from fleetcache.image.local import LocalImageSource, add_image
from fleetcache.image.source import ImageMeta
from fleetcache.privsep.rbd import (
    ExportSettings,
    RbdExportError,
    check_destination,
    configured_settings,
)
from tests.unit.compute.diskfixtures import disk_is_full
from tests.unit.image.fixtures import buffers_cannot_be_mapped, make_conf

CTXT = RequestContext()
FSID = "7d3c1f0e-2a4b-4c5d-8e9f-0a1b2c3d4e5f"
OTHER_FSID = "11111111-2222-4333-8444-555555555555"
DATA = os.urandom(9 * 1024 * 1024 + 3)


class RbdLocalSource(LocalImageSource):
    """The local source, whose images carry an rbd:// direct_url; counts HTTP downloads."""

    fsid = FSID
    downloads = 0

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        meta = super().show(ctxt, image_id)
        return dataclasses.replace(
            meta, direct_url=f"rbd://{self.fsid}/images/{image_id}/snap")

    def download(self, *args: Any, **kwargs: Any) -> int:
        self.downloads += 1
        return super().download(*args, **kwargs)


class FakeExport:
    """Stands in for ``export_to_fifo`` with the daemon's settings bound first (see
    :func:`_cache`): checks the destination against the daemon's base directory as
    ``run_export`` does, then writes ``data`` into the FIFO (or fails as told)."""

    def __init__(self, data: bytes = DATA, fail: str | None = None,
                 before_open: bool = False) -> None:
        self.data, self.fail, self.before_open = data, fail, before_open
        self.calls: list[tuple[ExportSettings, tuple[str, ...]]] = []

    def __call__(self, settings: ExportSettings, *args: str) -> int:
        self.calls.append((settings, args))
        self.cpus = os.sched_getaffinity(0)
        dest = args[3]
        check_destination(settings.base_dir, dest)
        if self.fail and self.before_open:
            raise RbdExportError(self.fail)
        with open(dest, "wb") as f:
            f.write(self.data[: len(self.data) // 2] if self.fail else self.data)
        if self.fail:
            raise RbdExportError(self.fail)
        return 0


@pytest.fixture
def env(tmp_path: pathlib.Path) -> dict[str, Any]:
    ceph_conf = tmp_path / "ceph.conf"
    ceph_conf.write_text(f"[global]\nfsid = {FSID}\n")
    conf = make_conf(instances_path=str(tmp_path / "instances"),
                     image_source__local_directory=str(tmp_path / "images"),
                     glance__allowed_direct_url_schemes=["rbd"],
                     glance__rbd_ceph_conf=str(ceph_conf), glance__rbd_user="compute")
    os.makedirs(tmp_path / "images")
    meta = add_image(str(tmp_path / "images"), io.BytesIO(DATA))
    return {"conf": conf, "meta": meta}


def _cache(env: dict[str, Any], export: Callable[..., Any]) -> ImageCache:
    """A cache whose export runs with the settings a privsep daemon started on the same
    configuration would resolve (:func:`configured_settings`)."""
    settings = RbdSettings.from_conf(env["conf"])
    assert settings is not None
    daemon = functools.partial(export, configured_settings(env["conf"]))
    return ImageCache(env["conf"], RbdLocalSource(env["conf"]), (), RbdDirect(settings, daemon))


def _leftovers(cache: ImageCache) -> list[str]:
    return sorted(n for n in os.listdir(cache.base_dir) if n.startswith("."))


def test_image_in_this_cluster_is_exported_verified_and_published(env):
    export = FakeExport()
    cache = _cache(env, export)
    outcome = cache.fetch(CTXT, env["meta"].id)
    assert (outcome.downloaded, outcome.bytes_downloaded, outcome.download_path,
            outcome.fallback_reason) == (True, len(DATA), "rbd", None)
    assert pathlib.Path(cache.path_for(env["meta"].id)).read_bytes() == DATA
    assert isinstance(cache.source, RbdLocalSource) and cache.source.downloads == 0
    ((settings, args),) = export.calls
    # The compute names the image and its FIFO, nothing else: who exports, with which files,
    # timeouts and into which directory is the daemon's configuration.
    assert args[:3] == ("images", env["meta"].id, "snap")
    assert len(args) == 4 and os.path.dirname(args[3]) == cache.base_dir
    ceph_conf = env["conf"].glance.rbd_ceph_conf
    assert settings.rbd == RbdSettings(
        user="compute", ceph_conf=ceph_conf,
        keyring=os.path.join(os.path.dirname(ceph_conf), "ceph.client.compute.keyring"),
        connect_timeout=5, osd_op_timeout=30, export_timeout=3600)
    assert settings.base_dir == cache.base_dir
    assert _leftovers(cache) == [] and cache.direct_fallbacks == 0


def test_the_export_runs_on_the_process_cpus_not_the_receiving_threads(env):
    # The first export starts the privsep daemon from its thread: confined like the
    # receiving thread (off the hash's CPU), the daemon would stay so for good.
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("a download confines its threads only with two CPUs or more")
    export = FakeExport()
    assert _cache(env, export).fetch(CTXT, env["meta"].id).download_path == "rbd"
    assert export.cpus == os.sched_getaffinity(0)


@pytest.mark.parametrize("export, reason", [
    (FakeExport(fail="rbd export of images/x@snap killed after the time limit of 1 s"),
     "killed after the time limit"),
    (FakeExport(fail="permission denied: rbd export ... (1) Operation not permitted",
                before_open=True), "permission denied"),
    (FakeExport(data=DATA[:-1] + bytes([DATA[-1] ^ 1])), "mismatch: got"),
    (FakeExport(data=DATA[:-5]), "size mismatch"),
])
def test_any_failure_of_the_export_falls_back_to_http_and_leaves_nothing(env, export, reason):
    cache = _cache(env, export)
    outcome = cache.fetch(CTXT, env["meta"].id)
    assert outcome.download_path == "http"
    assert outcome.fallback_reason is not None and reason in outcome.fallback_reason
    assert pathlib.Path(cache.path_for(env["meta"].id)).read_bytes() == DATA
    assert _leftovers(cache) == []
    assert cache.direct_fallbacks == 1


def test_a_fifo_that_cannot_be_made_falls_back_to_http(env, monkeypatch):
    """The export's FIFO is the direct path's own: its failure is the path's, not a disk
    refusing the image's bytes, so HTTP is tried and the fallback counted."""
    cache = _cache(env, FakeExport())

    def refused(path: str, mode: int = 0o666) -> None:
        raise OSError(errno.EMLINK, os.strerror(errno.EMLINK))

    monkeypatch.setattr(direct.os, "mkfifo", refused)
    outcome = cache.fetch(CTXT, env["meta"].id)
    assert outcome.download_path == "http" and cache.direct_fallbacks == 1
    assert outcome.fallback_reason is not None
    assert "cannot make the export's FIFO" in outcome.fallback_reason
    assert pathlib.Path(cache.path_for(env["meta"].id)).read_bytes() == DATA


@pytest.mark.parametrize(("fault", "error", "reason"), [
    (buffers_cannot_be_mapped, exception.HostOutOfMemory, "this host is out of memory"),
    (disk_is_full, exception.ImageStoreFailed, "cannot write .*No space left"),
])
def test_a_host_failure_is_no_fallback_to_http(env, monkeypatch, fault, error, reason):
    """The download's buffers cannot be mapped, or Ceph's bytes came and this host's disk
    refused them: the host's failure, which HTTP would meet too: no fallback counted, the
    image service not asked, nothing left."""
    cache = _cache(env, FakeExport())
    fault(monkeypatch)
    with pytest.raises(error, match=reason):
        cache.fetch(CTXT, env["meta"].id)
    assert isinstance(cache.source, RbdLocalSource) and cache.source.downloads == 0
    assert cache.direct_fallbacks == 0 and _leftovers(cache) == []
    assert not os.path.exists(cache.path_for(env["meta"].id))


def test_image_of_another_cluster_goes_over_http_with_the_reason(env):
    export = FakeExport()
    cache = _cache(env, export)
    assert isinstance(cache.source, RbdLocalSource)
    cache.source.fsid = OTHER_FSID
    outcome = cache.fetch(CTXT, env["meta"].id)
    assert outcome.download_path == "http" and export.calls == []
    assert outcome.fallback_reason is not None
    assert f"fsid mismatch: rbd://{OTHER_FSID}/images/" in outcome.fallback_reason
    assert FSID in outcome.fallback_reason
    assert cache.direct_fallbacks == 1


def test_unreadable_local_fsid_is_a_fallback(env, tmp_path):
    env["conf"].set_override("rbd_ceph_conf", str(tmp_path / "missing.conf"), group="glance")
    cache = _cache(env, FakeExport())
    outcome = cache.fetch(CTXT, env["meta"].id)
    assert outcome.download_path == "http"
    assert "cannot read the local cluster's fsid" in (outcome.fallback_reason or "")


def test_without_rbd_allowed_every_image_goes_over_http_without_a_reason(env):
    env["conf"].set_override("allowed_direct_url_schemes", [], group="glance")
    assert RbdSettings.from_conf(env["conf"]) is None
    cache = ImageCache(env["conf"], RbdLocalSource(env["conf"]))
    outcome = cache.fetch(CTXT, env["meta"].id)
    assert (outcome.download_path, outcome.fallback_reason) == ("http", None)
    assert cache.direct_fallbacks == 0


def test_bad_bytes_from_both_paths_cache_nothing(env, tmp_path):
    """Glance's rbd store serves Ceph's copy: a flipped byte fails both paths."""
    flipped = DATA[:100] + bytes([DATA[100] ^ 0xFF]) + DATA[101:]
    cache = _cache(env, FakeExport(data=flipped))
    image_file = next(p for p in (tmp_path / "images").iterdir() if not p.suffix)
    image_file.write_bytes(flipped)
    with pytest.raises(exception.ImageFetchError, match="mismatch"):
        cache.fetch(CTXT, env["meta"].id)
    assert not os.path.exists(cache.path_for(env["meta"].id))
    assert _leftovers(cache) == []


def test_when_both_paths_fail_the_error_names_both_reasons(env, tmp_path):
    cache = _cache(env, FakeExport(fail="permission denied: rbd export ... (13) Permission "
                                        "denied", before_open=True))
    image_file = next(p for p in (tmp_path / "images").iterdir() if not p.suffix)
    image_file.write_bytes(DATA[:-7])
    with pytest.raises(exception.ImageFetchError) as caught:
        cache.fetch(CTXT, env["meta"].id)
    message = str(caught.value)
    assert message.startswith(f"http: Could not fetch image {env['meta'].id}: size mismatch")
    assert "; rbd fallback because: ImageFetchError: " in message
    assert message.endswith("permission denied: rbd export ... (13) Permission denied")
    assert caught.value.kwargs["image_id"] == env["meta"].id
    assert cache.direct_fallbacks == 1 and _leftovers(cache) == []


def test_both_failed_keeps_the_http_error_type(env):
    """An image Glance no longer has stays ImageNotFound (a 404 to the API) after a fallback."""
    from fleetcache.compute.imagecache.download_paths import both_failed

    error = both_failed(exception.ImageNotFound(image_id="x"), "fsid mismatch: ...")
    assert isinstance(error, exception.ImageNotFound)
    assert str(error) == "http: Image x could not be found.; rbd fallback because: fsid " \
        "mismatch: ..."


def test_fifo_left_by_a_killed_compute_is_a_stale_partial(env):
    cache = _cache(env, FakeExport())
    cache.ensure_dirs()
    fifo = os.path.join(cache.base_dir, f"{partial_prefix(env['meta'].id)}rbd0badf00d")
    os.mkfifo(fifo)
    assert cache.list_entries() == []
    assert cache.remove_stale_partials() == [fifo]
    assert not os.path.lexists(fifo)
