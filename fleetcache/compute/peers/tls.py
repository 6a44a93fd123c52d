"""Mutual TLS between computes (``[image_cache] peer_ssl_*``): the SSL contexts of the image
server and of its client, built from the same three files.

Both sides require TLS 1.2 or later and a peer certificate signed by ``peer_ssl_ca_file``,
the only trust root (the system's CAs are never loaded). The client also checks the server's
certificate against the address it connects to (an IP subject alternative name). TLS is an
extra gate: each request still needs the conductor's credential
(:mod:`fleetcache.common.peer_tokens`).

Use::

    files = load(conf)                  # None: plain HTTP
    server = server_context(files)      # PeerServer wraps each accepted connection
    client = client_context(files)      # PeerSource's requests session

A set of options only partly given, or files that cannot be loaded, is
:class:`~fleetcache.common.exception.InvalidConfiguration` naming the options, so a compute
never starts half-secured.
"""

from __future__ import annotations

import dataclasses
import ssl

from oslo_config import cfg

from fleetcache.common import exception

#: The options, in the order an operator sets them.
OPTIONS = ("peer_ssl_cert_file", "peer_ssl_key_file", "peer_ssl_ca_file")


@dataclasses.dataclass(frozen=True)
class PeerTLSFiles:
    """This host's certificate and key, and the CA of its peers (PEM paths)."""

    cert_file: str
    key_file: str
    ca_file: str


def config_problem(conf: cfg.ConfigOpts) -> str | None:
    """Why ``[image_cache] peer_ssl_*`` cannot be used (some set, not all), or None."""
    opts = conf.image_cache
    unset = [name for name in OPTIONS if not getattr(opts, name)]
    if not unset or len(unset) == len(OPTIONS):
        return None
    given = [name for name in OPTIONS if name not in unset]
    return (f"[image_cache] {', '.join(given)} set without {', '.join(unset)}: peer mutual "
            f"TLS needs all of {', '.join(OPTIONS)} (or none, for plain HTTP)")


def load(conf: cfg.ConfigOpts) -> PeerTLSFiles | None:
    """The files of ``[image_cache] peer_ssl_*``; None when none is set (plain HTTP).

    :raises InvalidConfiguration: when only some of them are set.
    """
    problem = config_problem(conf)
    if problem is not None:
        raise exception.InvalidConfiguration(reason=problem)
    opts = conf.image_cache
    if not opts.peer_ssl_cert_file:
        return None
    return PeerTLSFiles(opts.peer_ssl_cert_file, opts.peer_ssl_key_file, opts.peer_ssl_ca_file)


def server_context(files: PeerTLSFiles) -> ssl.SSLContext:
    """The image server's context: client certificates required, signed by the CA.

    :raises InvalidConfiguration: a file cannot be read or does not hold what it should.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _secure(context, files)
    return context


def client_context(files: PeerTLSFiles) -> ssl.SSLContext:
    """The client's context: the server's certificate signed by the CA and naming the
    address connected to; this host's certificate presented.

    :raises InvalidConfiguration: a file cannot be read or does not hold what it should.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # check_hostname is on
    _secure(context, files)
    return context


def _secure(context: ssl.SSLContext, files: PeerTLSFiles) -> None:
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_REQUIRED
    try:
        context.load_cert_chain(files.cert_file, files.key_file)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise exception.InvalidConfiguration(
            reason=f"[image_cache] peer_ssl_cert_file {files.cert_file} with peer_ssl_key_file "
            f"{files.key_file} cannot be loaded: {exc}") from exc
    try:
        context.load_verify_locations(cafile=files.ca_file)
    except (OSError, ValueError) as exc:
        raise exception.InvalidConfiguration(
            reason=f"[image_cache] peer_ssl_ca_file {files.ca_file} cannot be loaded: "
            f"{exc}") from exc
