"""SQLAlchemy models of the fleetcache database.

Times are naive UTC. Aggregates keep Nova's shape: an integer id (what the Nova API shows) and
a uuid, hosts by name, and the availability zone stored as the ``availability_zone`` metadata
key.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: NOTE: MySQL/MariaDB ``DATETIME`` drops fractions of a second unless told otherwise; keep
#: microseconds everywhere so that heartbeats and a record read back compare as written.
PreciseDateTime = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class TimestampMixin:
    created_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime, default=utcnow)
    updated_at: Mapped[datetime.datetime | None] = mapped_column(
        PreciseDateTime, nullable=True, onupdate=utcnow
    )


class Cell(TimestampMixin, Base):
    """A cell: a group of computes that share one message broker (or vhost)."""

    __tablename__ = "cells"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    transport_url: Mapped[str] = mapped_column(Text)


class Service(TimestampMixin, Base):
    """A running daemon (a compute agent, a conductor) and its last heartbeat."""

    __tablename__ = "services"
    __table_args__ = (UniqueConstraint("host", "binary", name="uniq_services0host0binary"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    host: Mapped[str] = mapped_column(String(255), index=True)
    binary: Mapped[str] = mapped_column(String(64))
    topic: Mapped[str] = mapped_column(String(64))
    cell_id: Mapped[int | None] = mapped_column(
        ForeignKey("cells.id", ondelete="RESTRICT"), nullable=True
    )
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled_reason: Mapped[str | None] = mapped_column(String(255), nullable=True)
    forced_down: Mapped[bool] = mapped_column(Boolean, default=False)
    last_seen_up: Mapped[datetime.datetime | None] = mapped_column(PreciseDateTime, nullable=True)
    report_count: Mapped[int] = mapped_column(Integer, default=0)
    capabilities: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: When the conductor last brought the host's Placement resource provider in step with
    #: these capabilities; NULL until then (the host is not schedulable).
    placement_synced_at: Mapped[datetime.datetime | None] = mapped_column(
        PreciseDateTime, nullable=True)
    #: The address the service reported at registration (a compute's ``[DEFAULT] my_ip``);
    #: NULL for a service that reports none (a conductor, a compute older than the column).
    host_ip: Mapped[str | None] = mapped_column(String(39), nullable=True)

    cell: Mapped[Cell | None] = relationship(lazy="joined")


class Aggregate(TimestampMixin, Base):
    """A host aggregate, as in Nova."""

    __tablename__ = "aggregates"
    # Nova shows the integer id; on SQLite a deleted aggregate's id must not come back.
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)

    hosts: Mapped[list[AggregateHost]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", order_by="AggregateHost.id"
    )
    metadata_items: Mapped[list[AggregateMetadata]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", order_by="AggregateMetadata.id"
    )


class AggregateHost(Base):
    __tablename__ = "aggregate_hosts"
    __table_args__ = (
        UniqueConstraint("aggregate_id", "host", name="uniq_aggregate_hosts0aggregate_id0host"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    aggregate_id: Mapped[int] = mapped_column(ForeignKey("aggregates.id", ondelete="CASCADE"))
    host: Mapped[str] = mapped_column(String(255), index=True)


class AggregateMetadata(Base):
    __tablename__ = "aggregate_metadata"
    __table_args__ = (
        UniqueConstraint("aggregate_id", "key", name="uniq_aggregate_metadata0aggregate_id0key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    aggregate_id: Mapped[int] = mapped_column(ForeignKey("aggregates.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(255))
    value: Mapped[str] = mapped_column(String(255))


class CacheJob(TimestampMixin, Base):
    """One request to pre-cache images on an aggregate, and where it stands."""

    __tablename__ = "cache_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    aggregate_id: Mapped[int] = mapped_column(Integer, index=True)
    aggregate_uuid: Mapped[str] = mapped_column(String(36))
    image_ids: Mapped[list[str]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16), index=True)
    conductor_host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    total_hosts: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime.datetime | None] = mapped_column(PreciseDateTime, nullable=True)
    finished_at: Mapped[datetime.datetime | None] = mapped_column(PreciseDateTime, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: Until when the job's images are pinned on its hosts (the request's pin); NULL: none.
    pin_until: Mapped[datetime.datetime | None] = mapped_column(PreciseDateTime, nullable=True)
    #: The aggregate's hosts when the job was created: what a conductor taking the job over
    #: still has to call (those without a stored result). NULL for jobs that predate it.
    hosts: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    #: The conductor process running the job, ``<host>:<uuid of that process start>``.
    owner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: Until when ``owner`` holds the job; it renews the lease while it lives, and any
    #: conductor may claim the job once it has expired.
    lease_expires_at: Mapped[datetime.datetime | None] = mapped_column(
        PreciseDateTime, nullable=True)
    #: Until when hosts left ``pending`` (down, disabled, added later) are caught up; NULL
    #: when catch-up was off for this job.
    catch_up_until: Mapped[datetime.datetime | None] = mapped_column(
        PreciseDateTime, nullable=True)
    #: The request's terms (``fleetcache.common.job_terms.JobTerms``); NULL: none.
    terms: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: While the job waits for its window (``scheduled``): when it next opens.
    next_start_at: Mapped[datetime.datetime | None] = mapped_column(
        PreciseDateTime, nullable=True)

    results: Mapped[list[CacheJobResult]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", order_by="CacheJobResult.id"
    )


class CacheJobResult(Base):
    """The outcome of one image on one host within a job."""

    __tablename__ = "cache_job_results"
    __table_args__ = (
        UniqueConstraint(
            "job_id", "host", "image_id", name="uniq_cache_job_results0job_id0host0image_id"
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("cache_jobs.id", ondelete="CASCADE"))
    host: Mapped[str] = mapped_column(String(255))
    image_id: Mapped[str] = mapped_column(String(36))
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    bytes_downloaded: Mapped[int] = mapped_column(BigInteger, default=0)
    #: ``rbd`` or ``http`` for a download; None otherwise (or from an old compute).
    download_path: Mapped[str | None] = mapped_column(String(8), nullable=True)
    #: Why an image with an ``rbd://`` location was downloaded over HTTP, or why a host
    #: given peers fetched from the image service.
    fallback_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: The peer host the image's bytes came from (``download_path`` ``peer``).
    source_host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    #: Of ``bytes_downloaded``, those peers sent (None: before peer distribution existed).
    bytes_from_peers: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    updated_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime, default=utcnow)


class HostImage(Base):
    """One image in one compute's image cache, as the compute last reported it."""

    __tablename__ = "host_images"
    __table_args__ = (
        UniqueConstraint("host", "image_id", name="uniq_host_images0host0image_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    host: Mapped[str] = mapped_column(String(255), index=True)
    image_id: Mapped[str] = mapped_column(String(255), index=True)
    size: Mapped[int] = mapped_column(BigInteger, default=0)
    last_used: Mapped[datetime.datetime] = mapped_column(PreciseDateTime)
    #: Until when a pre-cache request pinned it on the host, as the compute reported; NULL:
    #: not pinned (or a compute that predates pins).
    pinned_until: Mapped[datetime.datetime | None] = mapped_column(
        PreciseDateTime, nullable=True)
    updated_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime, default=utcnow)


class HostImageCache(Base):
    """A compute's image cache as a whole: its disk usage and when it last reported."""

    __tablename__ = "host_image_caches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    host: Mapped[str] = mapped_column(String(255), unique=True)
    usage_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    image_count: Mapped[int] = mapped_column(Integer, default=0)
    reported_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime)
    updated_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime, default=utcnow)


class Flavor(TimestampMixin, Base):
    """A flavor, as Nova's: the resources an instance asks for, and extra specs that steer
    scheduling. ``flavorid`` is what the API shows as ``id``; ``id`` is internal."""

    __tablename__ = "flavors"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    flavorid: Mapped[str] = mapped_column(String(255), unique=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    vcpus: Mapped[int] = mapped_column(Integer)
    memory_mb: Mapped[int] = mapped_column(Integer)
    root_gb: Mapped[int] = mapped_column(Integer)
    ephemeral_gb: Mapped[int] = mapped_column(Integer, default=0)
    swap: Mapped[int] = mapped_column(Integer, default=0)
    is_public: Mapped[bool] = mapped_column(Boolean, default=True)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    #: Nova's network bandwidth factor: kept and shown as given (fleetcache has no network).
    rxtx_factor: Mapped[float] = mapped_column(Float, default=1.0, server_default="1.0")

    extra_specs: Mapped[list[FlavorExtraSpec]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", order_by="FlavorExtraSpec.id"
    )
    projects: Mapped[list[FlavorProject]] = relationship(
        lazy="selectin", cascade="all, delete-orphan", order_by="FlavorProject.id"
    )


class FlavorExtraSpec(Base):
    __tablename__ = "flavor_extra_specs"
    __table_args__ = (
        UniqueConstraint("flavor_id", "key", name="uniq_flavor_extra_specs0flavor_id0key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    flavor_id: Mapped[int] = mapped_column(ForeignKey("flavors.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(255))
    value: Mapped[str] = mapped_column(String(255))


class FlavorProject(Base):
    """A project a private flavor is shared with (Nova's flavor access)."""

    __tablename__ = "flavor_projects"
    __table_args__ = (
        UniqueConstraint("flavor_id", "project_id",
                         name="uniq_flavor_projects0flavor_id0project_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    flavor_id: Mapped[int] = mapped_column(ForeignKey("flavors.id", ondelete="CASCADE"))
    project_id: Mapped[str] = mapped_column(String(255), index=True)


class Instance(TimestampMixin, Base):
    """A server: a scheduled instance whose root disk a compute creates (no hypervisor).

    ``vm_state`` is Nova's (``building``, ``active``, ``error``, ``deleted``) and the API's
    ``status`` follows from it; the flavor is a snapshot taken at create time (deleting or
    changing the flavor later does not change the server), as Nova's ``instance.flavor``.
    A deleted instance keeps its row (``vm_state = deleted``, ``terminated_at``) for audit.
    """

    __tablename__ = "instances"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    project_id: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    user_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    display_name: Mapped[str] = mapped_column(String(255))
    image_ref: Mapped[str] = mapped_column(String(255))
    flavor: Mapped[dict[str, Any]] = mapped_column(JSON)
    reservation_id: Mapped[str] = mapped_column(String(255))
    launch_index: Mapped[int] = mapped_column(Integer, default=0)
    #: The zone asked for (``None``: any), and the admin's forced host of ``zone:host``.
    availability_zone: Mapped[str | None] = mapped_column(String(255), nullable=True)
    requested_host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    host: Mapped[str | None] = mapped_column(String(255), nullable=True, index=True)
    node: Mapped[str | None] = mapped_column(String(255), nullable=True)
    cell_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    vm_state: Mapped[str] = mapped_column(String(16), index=True)
    task_state: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: The conductor running the instance's current task: one that restarts fails what it
    #: left half done.
    conductor_host: Mapped[str | None] = mapped_column(String(255), nullable=True)
    fault_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    fault_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    #: Shown to admins only: the filter summary of a failed schedule, a traceback-free reason.
    fault_details: Mapped[str | None] = mapped_column(Text, nullable=True)
    fault_created_at: Mapped[datetime.datetime | None] = mapped_column(
        PreciseDateTime, nullable=True)
    #: What the compute's ``create_instance_disk`` returned (backend, path, format, base).
    disk: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    launched_at: Mapped[datetime.datetime | None] = mapped_column(PreciseDateTime, nullable=True)
    terminated_at: Mapped[datetime.datetime | None] = mapped_column(
        PreciseDateTime, nullable=True)
    #: What the owner said of the server, as Nova keeps it: its ``description`` (2.19; below
    #: that Nova stores the name), the ``accessIPv4``/``accessIPv6`` addresses (canonical
    #: text), the ``OS-DCF:diskConfig`` asked for (``AUTO``: true) and its ``metadata``
    #: (``{key: value}``; NULL: none). The metadata is a column rather than Nova's table of
    #: its own: the build path reads an instance several times per server, and a second
    #: query each time doubled the time of a 1,000-server build's state changes.
    display_description: Mapped[str | None] = mapped_column(Text, nullable=True)
    access_ip_v4: Mapped[str | None] = mapped_column(String(39), nullable=True)
    access_ip_v6: Mapped[str | None] = mapped_column(String(39), nullable=True)
    auto_disk_config: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    user_metadata: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)


class DownloadGate(Base):
    """The row every conductor locks (an ``UPDATE``) before it counts and takes download
    leases, so that two conductors never both see a free slot: one row per origin."""

    __tablename__ = "download_gates"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)


class DownloadLease(Base):
    """A slot of the image service taken by a conductor for one host's download of one image;
    it lapses at ``expires_at`` unless its holder renews it."""

    __tablename__ = "download_leases"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    holder: Mapped[str] = mapped_column(String(255), index=True)
    host: Mapped[str] = mapped_column(String(255))
    image_id: Mapped[str] = mapped_column(String(255), index=True)
    job_uuid: Mapped[str | None] = mapped_column(String(36), nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime, default=utcnow)
    expires_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime, index=True)


class DownloadWaiter(Base):
    """A host waiting for a slot of the image service, with its job's priority: a live waiter
    keeps the slots it could take from callers of a lower priority. Its conductor refreshes
    it at every attempt; it lapses at ``expires_at`` (a conductor that died)."""

    __tablename__ = "download_waiters"
    # A conductor names its waiter by id at its next attempt: on SQLite a deleted waiter's id
    # must not come back.
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    holder: Mapped[str] = mapped_column(String(255), index=True)
    host: Mapped[str] = mapped_column(String(255))
    image_id: Mapped[str] = mapped_column(String(255), index=True)
    job_uuid: Mapped[str | None] = mapped_column(String(36), nullable=True)
    priority: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime, default=utcnow)
    expires_at: Mapped[datetime.datetime] = mapped_column(PreciseDateTime, index=True)
