"""The embedded default: ``fleetcache demo``, every role in one process.

A conductor, the API and a few computes on oslo.messaging's in-process ``fake://`` transport,
SQLite, a ``local`` image source and a real Placement served in-process, driven through the
REST API as an operator would (``docs/architecture.md``, "The embedded default").

* :mod:`~fleetcache.demo.harness`: :func:`run` (the demo, on the services :class:`Builders`
  assembles), :func:`make_conf` (a service's configuration reading no file),
  :func:`serve_api` (the real API application on 127.0.0.1);
* :mod:`~fleetcache.demo.placement_embedded`: openstack-placement's WSGI application on
  SQLite, served on 127.0.0.1 (``serve``, ``point_at``), for the demo, the functional tests
  and ``bench/``.

The console script is ``fleetcache demo`` (:mod:`fleetcache.cmd.client`), which hands the
demo the daemons' ``build_service`` functions.
"""

from __future__ import annotations

from fleetcache.demo.harness import Builders, make_conf, run, serve_api

__all__ = ["Builders", "make_conf", "run", "serve_api"]
