"""The image source contract (:class:`ImageSource`, :class:`ImageMeta`) and its loader.

An image source answers two questions about an image id: what is it (``show``) and what are
its bytes (``download``). Sources are plugins in the entry point group
``fleetcache.image.sources``, chosen by ``[image_source] backend``.

Sources raise only fleetcache exceptions: third-party errors are translated where they happen,
inside each source. A source's ``download`` streams raw bytes; checking them against the
image's size and hashes is :mod:`fleetcache.image.verify`'s job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias

from oslo_config import cfg
from stevedore import ExtensionManager
from stevedore import driver as stevedore_driver
from stevedore.exception import NoMatches

from fleetcache.common import exception
from fleetcache.common.context import RequestContext

SOURCE_NAMESPACE = "fleetcache.image.sources"

#: Called with the number of bytes written so far, after each chunk.
ProgressCallback = Callable[[int], None]

#: Top-level fields of a Glance v2 image that are not custom properties.
CORE_FIELDS = frozenset(
    {
        "id", "name", "status", "visibility", "protected", "os_hidden", "owner", "tags",
        "disk_format", "container_format", "size", "virtual_size", "checksum",
        "os_hash_algo", "os_hash_value", "min_disk", "min_ram", "created_at", "updated_at",
        "direct_url", "locations", "self", "file", "schema", "stores",
    }
)


#: A chunk of image bytes: ``bytes``, or a buffer its producer hands over and never changes
#: again (a source that receives into a fresh ``bytearray`` per chunk passes it on without a
#: copy).
Buffer: TypeAlias = "bytes | bytearray | memoryview"


class Writer(Protocol):
    """Where a source puts the bytes it streams (a binary file object will do)."""

    def write(self, data: Buffer, /) -> int | None: ...


@dataclasses.dataclass(frozen=True)
class ImageMeta:
    """What an image source knows about one image, in Glance v2's terms."""

    id: str
    name: str | None = None
    status: str = "active"
    disk_format: str | None = None
    container_format: str | None = None
    size: int | None = None
    virtual_size: int | None = None
    checksum: str | None = None
    os_hash_algo: str | None = None
    os_hash_value: str | None = None
    #: The least RAM (MiB) and root disk (GiB) a server of this image needs (Glance's; 0: none).
    min_ram: int = 0
    min_disk: int = 0
    properties: dict[str, Any] = dataclasses.field(default_factory=dict)
    direct_url: str | None = None
    locations: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> ImageMeta:
        """Build from a Glance v2 image body (custom properties are top-level keys)."""
        return cls(
            id=str(body["id"]),
            name=body.get("name"),
            status=str(body.get("status") or "queued"),
            disk_format=body.get("disk_format"),
            container_format=body.get("container_format"),
            size=body.get("size"),
            virtual_size=body.get("virtual_size"),
            checksum=body.get("checksum"),
            os_hash_algo=body.get("os_hash_algo"),
            os_hash_value=body.get("os_hash_value"),
            min_ram=int(body.get("min_ram") or 0),
            min_disk=int(body.get("min_disk") or 0),
            properties={k: v for k, v in body.items() if k not in CORE_FIELDS},
            direct_url=body.get("direct_url"),
            locations=list(body.get("locations") or []),
        )

    def to_dict(self) -> dict[str, Any]:
        """The Glance v2 shape again: core fields plus the properties, top-level."""
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        props = body.pop("properties")
        return {**props, **body}


class ImageSource:
    """Base of every image source. Subclasses implement :meth:`show` and :meth:`download`."""

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.conf = conf

    def show(self, ctxt: RequestContext, image_id: str) -> ImageMeta:
        """The image's metadata, if it can be downloaded now.

        :raises ImageNotFound: no such image (or not visible to ``ctxt``).
        :raises ImageNotAvailable: the image exists but is not ``active`` or is forbidden.
        :raises ImageFetchError: the source could not be asked.
        """
        raise NotImplementedError

    def download(
        self,
        ctxt: RequestContext,
        meta: ImageMeta,
        writer: Writer,
        progress: ProgressCallback | None = None,
    ) -> int:
        """Stream the bytes of image ``meta`` (as :meth:`show` returned it) into ``writer``, in
        order, each byte exactly once: :meth:`download_from` byte 0, for a source that can
        start anywhere; a source that cannot overrides this instead.

        :returns: the number of bytes written.
        :raises ImageNotFound, ImageNotAvailable: as :meth:`show`.
        :raises ImageFetchError: the transfer failed (after the source's own retries).
        """
        return self.download_from(ctxt, meta, writer, 0, progress)

    def download_from(
        self,
        ctxt: RequestContext,
        meta: ImageMeta,
        writer: Writer,
        offset: int,
        progress: ProgressCallback | None = None,
    ) -> int:
        """Stream the bytes of image ``meta`` from byte ``offset`` on into ``writer``: the
        rest of a download another source began (a peer that failed mid-transfer), so that
        one hash still covers the whole image. ``progress`` is called with the image's bytes
        so far (``offset`` included).

        :returns: the number of bytes this call wrote.
        :raises NotImplementedError: the source cannot start mid-image (the caller then
            downloads from byte 0).
        :raises ImageNotFound, ImageNotAvailable, ImageFetchError: as :meth:`download`.
        """
        raise NotImplementedError

    def paced(self, rate: int) -> ImageSource:
        """This source tuned for downloads its caller paces at ``rate`` bytes a second (the
        writer it is given takes that long per chunk): for a network source, reads and
        receive buffers small enough that the sender is held to the pace too, not only the
        caller. The default: the source itself."""
        return self

    @staticmethod
    def check_active(meta: ImageMeta) -> ImageMeta:
        """Return ``meta`` if the image can be downloaded.

        :raises ImageNotAvailable: when its status is not ``active``.
        """
        if meta.status != "active":
            raise exception.ImageNotAvailable(
                image_id=meta.id, reason=f"status is {meta.status!r}, not 'active'"
            )
        return meta


def load_image_source(conf: cfg.ConfigOpts) -> ImageSource:
    """Load ``[image_source] backend`` by entry point name and build it from ``conf``.

    Errors the source's constructor raises (e.g. ``InvalidConfiguration``) propagate as they are.

    :raises InvalidConfiguration: naming the known sources when the name is unknown.
    """
    name = conf.image_source.backend
    try:
        manager: stevedore_driver.DriverManager[type[ImageSource]] = (
            stevedore_driver.DriverManager(
                SOURCE_NAMESPACE, name, invoke_on_load=False,
                on_load_failure_callback=_reraise,
            )
        )
    except NoMatches as exc:
        known = sorted(ExtensionManager(SOURCE_NAMESPACE).names())
        raise exception.InvalidConfiguration(
            reason=f"[image_source] backend={name!r} is unknown; known sources: {known}"
        ) from exc
    plugin = manager.driver
    if not (isinstance(plugin, type) and issubclass(plugin, ImageSource)):
        raise exception.InvalidConfiguration(
            reason=f"[image_source] backend={name!r} is not an ImageSource"
        )
    return plugin(conf)


def _reraise(manager: Any, entrypoint: Any, exc: BaseException) -> None:
    raise exception.InvalidConfiguration(
        reason=f"image source plugin {entrypoint.name!r} failed to load: {exc}"
    ) from exc
