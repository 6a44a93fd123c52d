"""``rbd://`` image locations: strict parsing, and which cluster a ``ceph.conf`` names.

Glance's rbd store names an image's data ``rbd://<fsid>/<pool>/<image>/<snapshot>``
(``direct_url`` with ``show_image_direct_url``, and ``locations``). A URL is accepted only with
exactly those four non-empty parts, each made of the characters :data:`NAME_PATTERN` allows,
and nothing else (no user, port, query or fragment): what reaches ``rbd export`` later is
these checked names, each bound to its option (``--pool=<pool>``), never a raw URL. The fsid
says which cluster holds the data (Glance itself does not check it): a URL of another cluster
than the compute's is not downloaded directly.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

from fleetcache.image.source import ImageMeta

#: Pool, image, snapshot and user names accepted: letters, digits, ``_``, ``.`` and ``-``, not
#: starting with ``.`` or ``-`` (so never ``..`` nor an option), at most 255 characters. Ceph
#: allows more (any character but ``/`` and ``@`` in an image name), but Glance creates
#: ``<pool>/<image id>@snap`` only, and anything outside this set is refused rather than
#: quoted.
NAME_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")


class InvalidRbdUrl(ValueError):
    """An ``rbd://`` URL that is not exactly ``rbd://<fsid>/<pool>/<image>/<snapshot>``."""


@dataclasses.dataclass(frozen=True)
class RbdLocation:
    """One checked ``rbd://`` location."""

    fsid: str
    pool: str
    image: str
    snapshot: str

    @property
    def url(self) -> str:
        return f"rbd://{self.fsid}/{self.pool}/{self.image}/{self.snapshot}"


def check_name(what: str, name: str) -> str:
    """``name`` if it is a pool/image/snapshot/user name :data:`NAME_PATTERN` accepts.

    :raises InvalidRbdUrl: naming ``what`` and the name.
    """
    if not isinstance(name, str) or NAME_PATTERN.fullmatch(name) is None:
        raise InvalidRbdUrl(f"{what} {name!r} has characters outside [A-Za-z0-9_.-], "
                            "starts with '.' or '-', or is empty or too long")
    return name


def parse_rbd_url(url: str) -> RbdLocation:
    """Parse ``rbd://<fsid>/<pool>/<image>/<snapshot>``, strictly.

    :raises InvalidRbdUrl: any other shape: another scheme, a user, port, query or fragment,
        not exactly four parts, an empty part, an fsid that is not a UUID, a name with a
        character outside :data:`NAME_PATTERN`, percent-escapes included.
    """
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidRbdUrl(f"unparsable URL: {exc}") from exc
    if parts.scheme != "rbd":
        raise InvalidRbdUrl(f"scheme {parts.scheme!r} is not rbd")
    if parts.query or parts.fragment or "@" in parts.netloc or ":" in parts.netloc:
        raise InvalidRbdUrl("an rbd URL has no user, port, query or fragment")
    fsid = parts.netloc
    try:
        if str(uuid.UUID(fsid)) != fsid.lower():
            raise ValueError(fsid)
    except ValueError as exc:
        raise InvalidRbdUrl(f"fsid {fsid!r} is not a UUID") from exc
    path = parts.path.split("/")
    if len(path) != 4 or path[0] != "":
        raise InvalidRbdUrl("not exactly four parts: rbd://<fsid>/<pool>/<image>/<snapshot>")
    _, pool, image, snapshot = path
    return RbdLocation(fsid.lower(), check_name("pool", pool), check_name("image", image),
                       check_name("snapshot", snapshot))


def rbd_urls(meta: ImageMeta) -> Iterator[str]:
    """The image's ``rbd://`` URLs: its ``locations`` in order, then ``direct_url`` (once)."""
    seen = set()
    urls = [loc.get("url") for loc in meta.locations if isinstance(loc, dict)]
    for url in [*urls, meta.direct_url]:
        if isinstance(url, str) and url.lower().startswith("rbd:") and url not in seen:
            seen.add(url)
            yield url


def read_fsid(ceph_conf: str) -> str:
    """The ``fsid`` of ``[global]`` in ``ceph_conf`` (lower case).

    Read line by line, as Ceph does (its files are often indented, which :mod:`configparser`
    would take for continuation lines).

    :raises OSError: the file cannot be read.
    :raises ValueError: it has no fsid in ``[global]``, or not a UUID.
    """
    section = None
    with open(ceph_conf, encoding="utf-8") as f:
        for raw in f:
            line = raw.split("#", 1)[0].split(";", 1)[0].strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1].strip().lower()
                continue
            key, sep, value = line.partition("=")
            if sep and section == "global" and key.strip().replace(" ", "_") == "fsid":
                return str(uuid.UUID(value.strip()))
    raise ValueError(f"{ceph_conf} names no fsid in [global]")
