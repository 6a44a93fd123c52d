"""The stack's Ceph-backed Glance and the Ceph users the compute side will use.

``tools/stack.sh up`` starts a throwaway Ceph (``tools/ceph.sh``), gives Glance an rbd store
beside its file store and uploads one raw sample image into it. These tests pin down what the
rbd download path and the rbd disk backend will stand on: Glance advertises the image as
``rbd://<fsid>/images/<id>/snap`` for *this* cluster, the compute's read-only user can export
exactly Glance's bytes and cannot write, and the instances user can clone Glance's snapshot.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import uuid
from typing import Any

import pytest

from tests.integration.stackops import glance_image

pytestmark = pytest.mark.integration
CHUNK = 1 << 20


def _glance_download_sha256(stack: Any, image_id: str) -> str:
    digest = hashlib.sha256()
    with stack.glance.get(f"{stack.glance_url}/v2/images/{image_id}/file", stream=True,
                      timeout=60) as resp:
        resp.raise_for_status()
        for chunk in resp.iter_content(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _file_digests(path: pathlib.Path) -> tuple[str, str]:
    sha256, sha512 = hashlib.sha256(), hashlib.sha512()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            sha256.update(chunk)
            sha512.update(chunk)
    return sha256.hexdigest(), sha512.hexdigest()


def _pool_images(stack: Any, pool: str) -> list[str]:
    names: list[str] = json.loads(stack.ceph.rbd("admin", "ls", "--format", "json", pool).stdout)
    return names


def test_rbd_sample_direct_url_names_this_cluster(stack: Any) -> None:
    import rados  # Debian's binding, linked into the venv (tools/ceph-bindings.sh)

    image_id = stack.rbd_sample_image
    image = glance_image(stack, image_id)
    # The cluster's own fsid, asked of the mon as the compute's user, not read from a file.
    cluster = rados.Rados(conffile=str(stack.ceph.conf), rados_id="compute",
                          conf={"keyring": str(stack.ceph.keyrings["compute"])})
    cluster.connect(timeout=10)
    try:
        fsid = cluster.get_fsid()
    finally:
        cluster.shutdown()
    assert fsid == stack.ceph.fsid
    assert image["status"] == "active"
    assert image["stores"] == stack.env["FLEETCACHE_GLANCE_RBD_STORE"]
    assert image["direct_url"] == f"rbd://{fsid}/images/{image_id}/snap"


def test_file_store_stays_the_default(stack: Any) -> None:
    for image_id in stack.sample_images:
        image = glance_image(stack, image_id)
        assert image["stores"] == "file"
        assert image["direct_url"].startswith("file://")


def test_compute_export_is_glances_bytes(stack: Any, tmp_path: pathlib.Path) -> None:
    image_id = stack.rbd_sample_image
    out = tmp_path / "export.raw"
    stack.ceph.rbd("compute", "export", "--no-progress", f"images/{image_id}@snap", str(out))
    sha256, sha512 = _file_digests(out)
    image = glance_image(stack, image_id)
    assert out.stat().st_size == image["size"]
    assert sha256 == _glance_download_sha256(stack, image_id)
    # the multihash Glance computed while the upload streamed into Ceph
    assert (image["os_hash_algo"], image["os_hash_value"]) == ("sha512", sha512)


@pytest.mark.parametrize("how", ["import", "create"])
def test_compute_cannot_write_images_pool(stack: Any, tmp_path: pathlib.Path, how: str) -> None:
    name = f"it-compute-{how}-{uuid.uuid4().hex[:8]}"
    if how == "import":
        payload = tmp_path / "payload.raw"
        payload.write_bytes(b"\x5a" * CHUNK)
        args = ["import", "--no-progress", str(payload), f"images/{name}"]
    else:
        args = ["create", "--size", "1M", f"images/{name}"]
    proc = stack.ceph.rbd("compute", *args, check=False)
    try:
        assert proc.returncode != 0
        # EPERM from the OSD: "profile rbd-read-only" grants no write to the pool's objects
        assert b"(1) Operation not permitted" in proc.stderr, proc.stderr
        assert name not in _pool_images(stack, "images")
    finally:
        if name in _pool_images(stack, "images"):
            stack.ceph.rbd("admin", "rm", "--no-progress", f"images/{name}")


def test_instances_user_clones_glance_snapshot(stack: Any) -> None:
    image_id = stack.rbd_sample_image
    clone = f"it-clone-{uuid.uuid4().hex[:8]}"
    stack.ceph.rbd("instances", "clone", f"images/{image_id}@snap", f"instances/{clone}")
    try:
        info = json.loads(stack.ceph.rbd("instances", "info", "--format", "json",
                                         f"instances/{clone}").stdout)
        assert (info["parent"]["pool"], info["parent"]["image"], info["parent"]["snapshot"]) \
            == ("images", image_id, "snap")
        assert clone in _pool_images(stack, "instances")
        stack.ceph.rbd("instances", "rm", "--no-progress", f"instances/{clone}")
        assert clone not in _pool_images(stack, "instances")
    finally:
        if clone in _pool_images(stack, "instances"):
            stack.ceph.rbd("admin", "rm", "--no-progress", f"instances/{clone}")
