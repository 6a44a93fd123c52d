"""A real OpenStack Placement in this process: openstack-placement's own WSGI application
(``placement.deploy.loadapp``) on SQLite, served on 127.0.0.1
(:mod:`fleetcache.demo._local_wsgi`), in ``[api] auth_strategy = noauth2``. The embedded
default (``fleetcache demo``) and the functional tests run it, so the conductor talks to
Placement over HTTP exactly as it does to the stack's gunicorn-served one.

NOTE: openstack-placement configures its database engine once per process
(``placement.db_api.configure`` runs once) and keeps its policy enforcer in a module global:
one embedded Placement per process. ``placement.direct`` is not used because it patches
keystoneauth's ``Session.get_endpoint`` for the whole process while it runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from fleetcache.demo import _local_wsgi

#: The noauth2 token of Placement's admin: user ``admin`` gets the admin role.
ADMIN_TOKEN = "admin"


def placement_conf(state_dir: str) -> cfg.ConfigOpts:
    """Placement's own configuration: SQLite in ``state_dir``, noauth2, schema synced at start."""
    from placement import conf as placement_conf_module  # openstack-placement, optional

    conf = cfg.ConfigOpts()
    placement_conf_module.register_opts(conf)
    conf.set_default("connection", f"sqlite:///{os.path.join(state_dir, 'placement.sqlite')}",
                     group="placement_database")
    conf([], project="placement", default_config_files=[], default_config_dirs=[])
    conf.set_override("sync_on_startup", True, group="placement_database")
    conf.set_override("auth_strategy", "noauth2", group="api")
    return conf


@contextlib.contextmanager
def serve(state_dir: str) -> Iterator[str]:
    """Run Placement until the block ends; yields its endpoint."""
    from placement import db_api, deploy

    conf = placement_conf(state_dir)
    db_api.configure(conf)
    # Placement logs every request at INFO; its warnings stay.
    logging.getLogger("placement.requestlog").setLevel(logging.WARNING)
    # NOTE: one request at a time: with a thread per request, concurrent writes from the
    # computes' registrations made Placement answer 500 "(sqlite3.OperationalError) database
    # is locked" (seen in tests/functional/test_demo.py under load); SQLite has one writer.
    with _local_wsgi.serve(deploy.loadapp(conf), "placement", threaded=False) as endpoint:
        yield endpoint


def point_at(conf: cfg.ConfigOpts, endpoint: str) -> None:
    """Set a fleetcache configuration's ``[placement]`` to the embedded Placement."""
    conf.set_override("auth_type", "admin_token", group="placement")
    # keystoneauth registers a plugin's own options (endpoint, token) when it loads it; they
    # must exist before they can be set.
    conf.register_opts(ks_loading.get_auth_plugin_conf_options("admin_token"), group="placement")
    conf.set_override("endpoint", endpoint, group="placement")
    conf.set_override("token", ADMIN_TOKEN, group="placement")
