"""fleetcache.compute.peers.tls: all three options or none, and what both contexts demand."""

from __future__ import annotations

import pathlib
import ssl

import pytest
from oslo_config import cfg

from fleetcache.common import exception
from fleetcache.compute.peers import tls
from tests.tls_certs import CertFiles, TestCA
from tests.unit.image.fixtures import make_conf


@pytest.fixture
def certs(tmp_path: pathlib.Path) -> CertFiles:
    return TestCA(tmp_path / "ca").issue("compute1", ip="10.0.0.11")


def _conf(cert: str | None = None, key: str | None = None, ca: str | None = None) -> cfg.ConfigOpts:
    return make_conf(image_cache__peer_ssl_cert_file=cert, image_cache__peer_ssl_key_file=key,
                     image_cache__peer_ssl_ca_file=ca)


def test_none_set_is_plain_http() -> None:
    conf = _conf()
    assert tls.config_problem(conf) is None and tls.load(conf) is None


@pytest.mark.parametrize(("given", "missing"), [
    ({"cert": "c"}, "peer_ssl_key_file, peer_ssl_ca_file"),
    ({"key": "k"}, "peer_ssl_cert_file, peer_ssl_ca_file"),
    ({"cert": "c", "key": "k"}, "peer_ssl_ca_file"),
    ({"ca": "a"}, "peer_ssl_cert_file, peer_ssl_key_file"),
])
def test_some_set_is_an_error_naming_what_is_missing(given: dict[str, str],
                                                     missing: str) -> None:
    conf = _conf(**given)
    problem = tls.config_problem(conf)
    assert problem is not None and f"set without {missing}: " in problem
    assert problem.startswith("[image_cache] ") and "\n" not in problem
    with pytest.raises(exception.InvalidConfiguration, match=missing):
        tls.load(conf)


def test_both_contexts_require_tls_1_2_and_a_ca_signed_peer(certs: CertFiles) -> None:
    files = tls.load(_conf(certs.cert, certs.key, certs.ca))
    assert files == tls.PeerTLSFiles(certs.cert, certs.key, certs.ca)
    server, client = tls.server_context(files), tls.client_context(files)
    for context in (server, client):
        assert context.minimum_version == ssl.TLSVersion.TLSv1_2
        assert context.verify_mode == ssl.CERT_REQUIRED
        assert [c["subject"] for c in context.get_ca_certs()] == [
            ((("commonName", "fleet CA"),),)]  # the only trust root
    assert client.check_hostname and not server.check_hostname


def test_files_that_do_not_load_name_their_option(certs: CertFiles,
                                                  tmp_path: pathlib.Path) -> None:
    missing = str(tmp_path / "nowhere.pem")
    cases = [(tls.PeerTLSFiles(missing, certs.key, certs.ca), "peer_ssl_cert_file"),
             (tls.PeerTLSFiles(certs.cert, certs.ca, certs.ca), "peer_ssl_key_file"),
             (tls.PeerTLSFiles(certs.cert, certs.key, missing), "peer_ssl_ca_file")]
    for files, option in cases:
        with pytest.raises(exception.InvalidConfiguration, match=option):
            tls.server_context(files)
        with pytest.raises(exception.InvalidConfiguration, match=option):
            tls.client_context(files)
