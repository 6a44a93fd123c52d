"""Builds a corpus of hostile (and a few honest) images with ``qemu-img`` and by hand.

Each builder writes into ``directory`` and returns the image path. ``qemu-img`` must be
installed (``tools/install-debian-deps.sh`` or ``apt-get install qemu-utils``): its absence
makes these tests fail, never skip.
"""

from __future__ import annotations

import pathlib
import shutil
import struct
import subprocess

QEMU_IMG = shutil.which("qemu-img")


def qemu_img(*args: str) -> str:
    assert QEMU_IMG, "qemu-img is not installed: run tools/install-debian-deps.sh"
    done = subprocess.run([QEMU_IMG, *args], check=True, capture_output=True, text=True)
    return done.stdout


def qcow2(directory: pathlib.Path, name: str = "good.qcow2", size: str = "4M") -> pathlib.Path:
    path = directory / name
    qemu_img("create", "-f", "qcow2", str(path), size)
    return path


def qcow2_with_data(directory: pathlib.Path, name: str = "data.qcow2") -> pathlib.Path:
    """A qcow2 with recognisable data in its first cluster (for conversion checks)."""
    raw = directory / f"{name}.src.raw"
    with open(raw, "wb") as f:
        f.write(b"FLEETCACHE" * 1000)
        f.truncate(4 * 1024 * 1024)
    path = directory / name
    qemu_img("convert", "-f", "raw", "-O", "qcow2", str(raw), str(path))
    raw.unlink()
    return path


def raw(directory: pathlib.Path, name: str = "disk.raw", size: int = 1 << 20) -> pathlib.Path:
    path = directory / name
    with open(path, "wb") as f:
        f.write(b"\x00" * 4096 + b"not a header" * 100)
        f.truncate(size)
    return path


def qcow2_backing_passwd(directory: pathlib.Path) -> pathlib.Path:
    """CVE-style: a qcow2 whose backing file is a host file."""
    path = directory / "backing-passwd.qcow2"
    qemu_img("create", "-f", "qcow2", "-b", "/etc/passwd", "-F", "raw", str(path), "1M")
    return path


def qcow2_data_file(directory: pathlib.Path) -> pathlib.Path:
    """CVE-2024-32498: a qcow2 with an external data-file."""
    path = directory / "data-file.qcow2"
    data = directory / "data-file.bin"
    qemu_img("create", "-f", "qcow2", "-o", f"data_file={data}", str(path), "1M")
    return path


def vmdk_flat_passwd(directory: pathlib.Path) -> pathlib.Path:
    """CVE-2022-47951: a monolithicFlat VMDK descriptor whose extent is a host file."""
    path = directory / "flat-passwd.vmdk"
    path.write_text(
        "# Disk DescriptorFile\n"
        "version=1\n"
        "CID=fffffffe\n"
        "parentCID=ffffffff\n"
        'createType="monolithicFlat"\n'
        "\n"
        "# Extent description\n"
        'RW 2048 FLAT "/etc/passwd" 0\n'
        "\n"
        "# The Disk Data Base\n"
        "#DDB\n"
        'ddb.virtualHWVersion = "4"\n'
        'ddb.adapterType = "ide"\n'
    )
    return path


def vmdk(directory: pathlib.Path, subformat: str = "monolithicSparse") -> pathlib.Path:
    path = directory / f"{subformat}.vmdk"
    qemu_img("create", "-f", "vmdk", "-o", f"subformat={subformat}", str(path), "4M")
    return path


def truncated_qcow2_header(directory: pathlib.Path) -> pathlib.Path:
    """A qcow2 cut inside its 512-byte header."""
    path = directory / "truncated-header.qcow2"
    path.write_bytes(qcow2(directory, "full-for-header.qcow2").read_bytes()[:300])
    return path


def truncated_qcow2_body(directory: pathlib.Path) -> pathlib.Path:
    """A qcow2 with a complete header but cut before its tables (``qemu-img info`` passes)."""
    path = directory / "truncated-body.qcow2"
    path.write_bytes(qcow2(directory, "full-for-body.qcow2").read_bytes()[:1024])
    return path


def _mbr(valid: bool) -> bytes:
    """A protective MBR (one 0xEE partition) or a malformed one (bad boot flag)."""
    mbr = bytearray(512)
    boot = 0x00 if valid else 0x42
    mbr[446:462] = struct.pack("<B3BB3BII", boot, 0, 2, 0, 0xEE, 0xFF, 0xFF, 0xFF, 1, 0xFFFF)
    mbr[510:512] = b"\x55\xaa"
    return bytes(mbr)


def _iso_pvd() -> bytes:
    pvd = bytearray(2048)
    pvd[0] = 1
    pvd[1:6] = b"CD001"
    pvd[6] = 1
    pvd[80:88] = struct.pack("<L", 64) + struct.pack(">L", 64)
    pvd[128:132] = struct.pack("<H", 2048) + struct.pack(">H", 2048)
    return bytes(pvd)


def gpt_iso_polyglot(directory: pathlib.Path, valid_mbr: bool = False) -> pathlib.Path:
    """An ISO 9660 image that is also an MBR/GPT disk (bootable hybrids look like this)."""
    path = directory / f"gpt-iso-{'hybrid' if valid_mbr else 'hostile'}.iso"
    body = bytearray(64 * 2048)
    body[0:512] = _mbr(valid_mbr)
    body[32768 : 32768 + 2048] = _iso_pvd()
    path.write_bytes(bytes(body))
    return path


def qcow2_iso_polyglot(directory: pathlib.Path) -> pathlib.Path:
    """A valid qcow2 header followed by an ISO volume descriptor at 32 KiB."""
    path = directory / "qcow2-iso.img"
    body = bytearray(qcow2(directory, "for-polyglot.qcow2", "1M").read_bytes())
    body.extend(b"\x00" * max(0, 32768 + 2048 - len(body)))
    body[32768 : 32768 + 2048] = _iso_pvd()
    path.write_bytes(bytes(body))
    return path
