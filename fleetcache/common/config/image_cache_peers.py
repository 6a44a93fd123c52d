"""Peer distribution options of the ``[image_cache]`` group: computes fetch an image from a
host of their own peer group that holds it, the conductor choosing the sources."""

from __future__ import annotations

from oslo_config import cfg

from fleetcache.common.config.image_cache import image_cache_group

peer_opts: list[cfg.Opt] = [
    cfg.BoolOpt(
        "peer_distribution",
        default=False,
        help="""
Whether pre-cache jobs fetch about one copy of an image per peer group from the image service
and let the other hosts of the group fetch it from a host that holds it.

Set it in every daemon's configuration: on a conductor it assigns peers as sources; on a
compute it runs the image server (``peer_listen_address``, ``peer_listen_port``) that serves
cached images to the hosts of a job, each request with a credential the conductor issued for
that job and image. A compute without it never serves; a conductor without it, or a compute
capped below compute RPC 1.4, fetches from the image service as before.

Related options:
* peer_group, peer_listen_address, peer_listen_port
* origin_downloads_per_group, peer_max_uploads, peer_wait_timeout
""",
    ),
    cfg.StrOpt(
        "peer_group",
        default="",
        help="""
(compute) The site or rack this host belongs to, for peer groups finer than a cell: hosts
fetch from peers of the same cell and the same ``peer_group``. Empty: the whole cell is one
group.
""",
    ),
    cfg.HostAddressOpt(
        "peer_listen_address",
        help="""
(compute) The address the image server listens on and that peers connect to. Unset: the
host's ``[DEFAULT] my_ip``. Use an address of the storage or management network: the server
sends image bytes in clear unless mutual TLS is configured.
""",
    ),
    cfg.PortOpt(
        "peer_listen_port",
        default=8790,
        help="(compute) The TCP port of the image server.",
    ),
    cfg.BoolOpt(
        "peer_cut_through",
        default=True,
        help="""
Whether a host still downloading an image serves the bytes it has already written (with
``peer_distribution``), so that the hosts of a group form chains and trees instead of
rounds of whole copies: the time to all hosts then stays nearly flat in the group's size.

On a conductor, a host becomes a source of an image as soon as its own download of it is
assigned (``serve_images`` before its ``cache_images``), not once it finished; on a
compute, ``serve_images`` accepts an image that is not cached yet, and the image server
streams the download under way: what is written, then what comes, up to the image's size
(waiting at most ``peer_stall_timeout`` for more; a failed download ends the response
short, and the receiver resumes from its next source). Every receiver still verifies the
whole image against the image service's record. False: a host serves an image only once it
holds all of it (store-and-forward).

Related options:
* peer_distribution, peer_max_uploads, peer_stall_timeout
""",
    ),
    cfg.IntOpt(
        "peer_max_uploads",
        default=1,
        min=1,
        help="""
Concurrent uploads one source host serves. The conductor assigns at most this many
receivers to one source; the compute answers 503 with ``Retry-After`` beyond it.

One is the fastest where a source's upload is the bound: each receiver gets all of it and
the holders of a group double per round (``bench/p2p.py``: 16 hosts of one group in 12.7 s
with 1, 14.5 s with 2). More helps where the receivers, not the sources, are slow.
""",
    ),
    cfg.IntOpt(
        "origin_downloads_per_group",
        default=1,
        min=1,
        help="""
(conductor) Hosts of one peer group fetching one image from the image service at once while
no host of the group holds it. The global limits (``max_concurrent_downloads_per_image``,
``max_concurrent_downloads``) still apply.
""",
    ),
    cfg.IntOpt(
        "peer_candidates",
        default=2,
        min=1,
        help="(conductor) Peers a host is given for one image, tried in order before the "
        "image service.",
    ),
    cfg.IntOpt(
        "peer_wait_timeout",
        default=300,
        min=0,
        help="""
(conductor and compute) Seconds a host waits for a peer before it fetches from the image
service: on the conductor, for a peer of its group to hold an image (or to have a free upload
slot); on the compute, for a byte from its peers once they failed, while any of them may
still send (it sent bytes in its last attempt, or answered 503: busy, or its own download is
not that far yet); a peer that refuses the connection or answers 404 is given up at once.
Its image server tells receivers to wait for an image it gave back to the conductor that long
after it gave it back.
""",
    ),
    cfg.IntOpt(
        "peer_quarantine_time",
        default=3600,
        min=0,
        help="(conductor) Seconds a host that sent bytes failing verification is not used as a "
        "source.",
    ),
    cfg.IntOpt(
        "peer_stall_timeout",
        default=30,
        min=1,
        help="""
(compute) Seconds without a byte from a peer before the download moves on to the next
source, resuming with a ``Range`` request at the bytes already written (a peer that sent
bytes is asked again after the others, see ``peer_wait_timeout``).
""",
    ),
    cfg.IntOpt(
        "max_upload_bytes_per_second",
        default=0,
        min=0,
        help="(compute) Bytes per second the image server sends, all uploads together; 0: no "
        "limit.",
    ),
    cfg.BoolOpt(
        "peer_check_source_address",
        default=True,
        help="(compute) Whether a peer request must come from the address the conductor "
        "named in its credential: the one the requesting compute's image server is bound to "
        "(its ``peer_listen_address``, a host name resolved, else its ``my_ip``), which its "
        "requests to peers come from.",
    ),
]


peer_tls_opts: list[cfg.Opt] = [
    cfg.StrOpt(
        "peer_ssl_cert_file",
        help="""
(compute) PEM certificate of this host for mutual TLS between peers: its image server
presents it to the hosts that fetch from it, and it presents it to the image servers it
fetches from.

Set ``peer_ssl_cert_file``, ``peer_ssl_key_file`` and ``peer_ssl_ca_file`` together (or none
of them: plain HTTP, the default); a compute with only some of them set does not start. With
them, the image server accepts only TLS 1.2 or later from a client whose certificate the CA
signed (a connection without one is refused during the handshake, before any HTTP), still
asks each request for the conductor's credential, and reports an ``https://`` URL; this
host fetches only from ``https://`` peers whose certificate the CA signed for the address it
connects to. The certificate must hold the image server's address (``peer_listen_address``,
else ``my_ip``) as an IP subject alternative name.

Possible values:
* the path of a PEM file (the certificate, then any intermediates)

Related options:
* peer_ssl_key_file, peer_ssl_ca_file, peer_listen_address
""",
    ),
    cfg.StrOpt(
        "peer_ssl_key_file",
        help="""
(compute) PEM private key (unencrypted) of ``peer_ssl_cert_file``.

Related options:
* peer_ssl_cert_file, peer_ssl_ca_file
""",
    ),
    cfg.StrOpt(
        "peer_ssl_ca_file",
        help="""
(compute) PEM certificates of the CA that signs the peers' certificates: the only trust root
of peer TLS, on both sides (the system's CAs are never used). Use a CA of its own for the
fleet's computes: any certificate it signed is accepted as a peer.

Related options:
* peer_ssl_cert_file, peer_ssl_key_file
""",
    ),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(image_cache_group)
    conf.register_opts(peer_opts, group=image_cache_group)
    conf.register_opts(peer_tls_opts, group=image_cache_group)


def list_opts() -> list[tuple[cfg.OptGroup, list[cfg.Opt]]]:
    return [(image_cache_group, [*peer_opts, *peer_tls_opts])]
