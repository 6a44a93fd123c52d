"""Peer distribution on the compute (issue 22): computes of one site fetch an image from each
other, verified end to end, the conductor choosing the sources.

* :mod:`~fleetcache.compute.peers.grants`: :class:`ServeGrants`, the jobs this compute serves
  and their keys (opened by ``serve_images``);
* :mod:`~fleetcache.compute.peers.server`: :class:`PeerServer`, the read-only image server
  (the HTTP it speaks, :mod:`~fleetcache.compute.peers.http_wire`; its bounded pool of
  workers, :mod:`~fleetcache.compute.peers.listener`; the file a request reads,
  :mod:`~fleetcache.compute.peers.image_files`);
* :mod:`~fleetcache.compute.peers.source`: :class:`PeerSource`, the client, an image source
  feeding the image cache's one-pass verification (:class:`Peer`, one source as the
  conductor names it, is :mod:`fleetcache.compute.rpcapi`'s);
* :mod:`~fleetcache.compute.peers.tls`: optional mutual TLS of both
  (``[image_cache] peer_ssl_*``).

The tokens themselves are :mod:`fleetcache.common.peer_tokens` (the conductor mints them).
"""

from __future__ import annotations

from fleetcache.compute.peers.grants import ServeGrants
from fleetcache.compute.peers.server import PeerServer
from fleetcache.compute.peers.source import PeerAttempt, PeersFailed, PeerSource
from fleetcache.compute.rpcapi import Peer

__all__ = ["Peer", "PeerAttempt", "PeerServer", "PeerSource", "PeersFailed", "ServeGrants"]
