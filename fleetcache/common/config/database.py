"""Options of the ``[database]`` group."""

from __future__ import annotations

from oslo_config import cfg

database_group = cfg.OptGroup("database", title="Database options")

database_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "connection",
        default="sqlite:///$state_path/fleetcache.sqlite",
        secret=True,
        help="""
SQLAlchemy URL of the fleetcache database.

SQLite is the embedded default; PostgreSQL (``postgresql+psycopg2://...``) and MariaDB/MySQL
(``mysql+pymysql://...``) are supported. Compute agents never use it.
""",
    ),
    cfg.IntOpt(
        "max_pool_size",
        default=10,
        min=1,
        help="Connections kept open in the pool (not used with SQLite).",
    ),
    cfg.IntOpt(
        "pool_recycle",
        default=3600,
        min=-1,
        help="Seconds after which a pooled connection is replaced (-1: never).",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(database_group)
    conf.register_opts(database_opts, group=database_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(database_group, database_opts)]
