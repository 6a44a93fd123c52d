"""Format safety: decide whether an image's bytes may be handed to qemu-img and the hypervisor.

This is Nova's ``do_image_deep_inspection`` plus the checks of ``fetch_to_raw`` (CVE-2022-47951,
CVE-2024-32498, CVE-2024-40767), on oslo.utils' ``imageutils.format_inspector``:

1. the declared Glance ``disk_format`` must be one fleetcache can inspect;
2. the content's format is detected (``iso`` + ``gpt`` counts as ``iso``; any other
   multi-match, a polyglot, is refused) and must equal ``disk_format`` (``raw`` declared but
   ``gpt`` detected is allowed; ``ami``/``aki``/``ari`` must be plain raw content);
3. VMDK create-types must be in ``[compute] vmdk_allowed_types``;
4. the inspector's ``safety_check()`` must pass (no qcow2 backing file or data-file, no VMDK
   extent outside the file, ...);
5. only then, for a format with a header (anything qemu reads as other than raw), ``qemu-img
   info -f <format>`` under ``[libvirt] images_*_limit`` must agree on the format and report
   no backing file and no data-file;
6. a qcow2 must also pass ``qemu-img check`` (a truncated qcow2 passes ``info``).

Raw content (raw, a partitioned raw disk, iso, ami, aki, ari) has no header, hence no backing
or data file: rules 1-4 are its whole check (the inspector matched no other format), and
``qemu-img info -f raw`` would only report the file's size, so it is not run. A host without
``qemu-img`` can therefore accept raw images, and refuses every other format saying so.

Any refusal raises :class:`~fleetcache.common.exception.ImageFormatRejected` saying why.

Streaming use (the download path, no second read of the file)::

    inspection = StreamInspection(image_id, disk_format)   # refuses unknown formats at once
    with open(tmp_path, "wb") as f:   # feed() may raise ImageFormatRejected: delete tmp_path
        download_verified(source, ctxt, meta, f, observers=[inspection.feed])
    inspected = inspect_image(tmp_path, disk_format, conf, image_id=image_id, stream=inspection)
    # only now move tmp_path into _base (or convert it, see fleetcache.compute.imagebackend)

``feed`` stops looking at the data once the format is decided (after 64-256 KiB for most
images; VMDKs with a footer are watched to the end), so after that a chunk costs one attribute
check. It must see every byte once, in file order: keep the same ``StreamInspection`` across a
``Range`` resume, or, if that is not possible, call ``inspect_image`` without ``stream`` (it
reads just the headers). Check the multihash first: a corrupted download is no image at all.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils.imageutils import format_inspector as fi

from fleetcache.common import exception
from fleetcache.common.disk_formats import AMI_FORMATS, content_format
from fleetcache.image import qemu
from fleetcache.image.format_stream import (
    StreamInspection,
    check_declared_format,
    detect_from_file,
    reject,
)

LOG = logging.getLogger(__name__)

__all__ = [
    "InspectedImage",
    "StreamInspection",
    "inspect_image",
]


@dataclasses.dataclass(frozen=True)
class InspectedImage:
    """An image that passed every check.

    :ivar disk_format: the format Glance declared.
    :ivar detected: what the format inspector found (``gpt`` for a partitioned raw disk).
    :ivar format: the format qemu-img reads it as (``raw`` for iso, gpt, ami, aki, ari).
    :ivar virtual_size: bytes, as ``qemu-img info`` reports (raw content: the file's size).
    :ivar actual_size: bytes allocated on disk, as ``qemu-img info`` reports (raw content: from
        ``stat``; 0 if unknown).
    :ivar vmdk_create_type: the VMDK create-type, for VMDK images.
    """

    disk_format: str
    detected: str
    format: str
    virtual_size: int
    actual_size: int = 0
    vmdk_create_type: str | None = None


def _check_inspector(
    inspector: fi.FileInspector, disk_format: str, conf: cfg.ConfigOpts, image_id: str | None
) -> str | None:
    """Rules 2-4 on the detected format; returns the VMDK create-type if any."""
    detected = str(inspector)
    if detected != disk_format and not (
        (disk_format == "raw" and detected == "gpt")
        or (disk_format in AMI_FORMATS and detected == "raw")
    ):
        hint = ""
        if detected == "raw" and disk_format in fi.ALL_FORMATS:
            hint = f" (no complete {disk_format} header: not {disk_format}, or truncated)"
        raise reject(
            image_id, f"content is {detected}{hint} but Glance disk_format is {disk_format}"
        )
    create_type = None
    if detected == "vmdk":
        create_type = str(getattr(inspector, "vmdktype", "formatnotfound"))
        _check_vmdk_type(create_type, conf, image_id)
    try:
        inspector.safety_check()
    except fi.SafetyCheckFailed as exc:
        failures = "; ".join(f"{name}: {err}" for name, err in sorted(exc.failures.items()))
        raise reject(image_id, f"{detected} image fails the safety check ({failures})") from exc
    except fi.ImageFormatError as exc:
        raise reject(image_id, f"{detected} image cannot be safety checked: {exc}") from exc
    return create_type


def _check_vmdk_type(create_type: str, conf: cfg.ConfigOpts, image_id: str | None) -> None:
    allowed = list(conf.compute.vmdk_allowed_types)
    if not allowed:
        raise reject(image_id, "VMDK images are refused: [compute] vmdk_allowed_types is empty")
    if create_type.lower() not in {t.lower() for t in allowed}:
        raise reject(
            image_id,
            f"VMDK create-type {create_type} is not in [compute] vmdk_allowed_types "
            f"({', '.join(allowed)})",
        )


def _check_qemu_info(
    data: dict[str, Any], qemu_format: str, conf: cfg.ConfigOpts, image_id: str | None
) -> None:
    """Rule 5: what qemu-img says must agree with the inspector and carry no external file."""
    reported = data.get("format")
    if reported != qemu.driver_name(qemu_format):
        raise reject(
            image_id, f"qemu-img reads it as {reported} but the inspector found {qemu_format}"
        )
    backing = data.get("backing-filename") or data.get("full-backing-filename")
    if backing:
        raise reject(image_id, f"qemu-img reports a backing file: {backing}")
    specific = (data.get("format-specific") or {}).get("data") or {}
    if specific.get("data-file"):
        raise reject(image_id, f"qemu-img reports a data-file: {specific['data-file']}")
    if qemu_format == "vmdk":
        _check_vmdk_type(str(specific.get("create-type", "unknown")), conf, image_id)


def _check_qcow2_consistency(path: str, conf: cfg.ConfigOpts, image_id: str | None) -> None:
    """A truncated qcow2 passes ``qemu-img info``; ``qemu-img check`` finds it."""
    try:
        report = qemu.check(
            path,
            "qcow2",
            cpu_time_s=conf.libvirt.images_cpu_time_limit,
            address_space_gib=conf.libvirt.images_address_space_limit,
        )
    except exception.QemuImgError as exc:
        raise reject(image_id, f"qemu-img check -f qcow2 refused it: {exc}") from exc
    if report.get("corruptions") or report.get("check-errors"):
        raise reject(
            image_id,
            f"qcow2 image is corrupt or truncated (qemu-img check: "
            f"{report.get('corruptions', 0)} corruptions, "
            f"{report.get('check-errors', 0)} check errors)",
        )


def inspect_image(
    path: str,
    disk_format: str,
    conf: cfg.ConfigOpts,
    *,
    image_id: str | None = None,
    stream: StreamInspection | None = None,
) -> InspectedImage:
    """Check the image at ``path`` (Glance ``disk_format``) before anything else uses it.

    :param stream: the :class:`StreamInspection` fed while ``path`` was written; its verdict
        is used instead of reading the file's headers again.
    :raises ImageFormatRejected: with the precise reason.
    """
    check_declared_format(image_id, disk_format)
    if stream is not None:
        if stream.disk_format != disk_format:
            raise ValueError(f"stream inspected {stream.disk_format}, not {disk_format}")
        inspector = stream.finish()
    else:
        inspector = detect_from_file(path, image_id, disk_format)
    create_type = _check_inspector(inspector, disk_format, conf, image_id)
    detected = str(inspector)
    qemu_format = "raw" if detected == "gpt" else content_format(detected)
    if qemu_format == "raw":
        st = os.stat(path)
        LOG.debug("Image %s passed format inspection as raw content (%s)", image_id, detected)
        return InspectedImage(disk_format=disk_format, detected=detected, format="raw",
                              virtual_size=st.st_size, actual_size=st.st_blocks * 512)
    if shutil.which(qemu.QEMU_IMG) is None:
        raise reject(image_id, f"a {qemu_format} image is checked with qemu-img, which is not "
                     "installed on this host (Debian package qemu-utils)")
    try:
        data = qemu.info(
            path,
            qemu_format,
            cpu_time_s=conf.libvirt.images_cpu_time_limit,
            address_space_gib=conf.libvirt.images_address_space_limit,
        )
    except exception.QemuImgError as exc:
        raise reject(image_id, f"qemu-img info -f {qemu_format} refused it: {exc}") from exc
    _check_qemu_info(data, qemu_format, conf, image_id)
    if qemu_format == "qcow2":
        _check_qcow2_consistency(path, conf, image_id)
    LOG.debug("Image %s passed format inspection as %s", image_id, qemu_format)
    return InspectedImage(
        disk_format=disk_format,
        detected=detected,
        format=qemu_format,
        virtual_size=int(data.get("virtual-size", 0)),
        actual_size=int(data.get("actual-size", 0)),
        vmdk_create_type=create_type,
    )
