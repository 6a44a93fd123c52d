"""Unit tests of the direct-download settings (fleetcache.common.rbd_settings): the one
resolution of ``[glance]``/``[libvirt]`` that the compute and its privsep daemon share."""

from __future__ import annotations

import pytest

from fleetcache.common.rbd_settings import RbdSettings
from tests.unit.image.fixtures import make_conf


def test_settings_need_rbd_allowed_and_fall_back_to_novas_libvirt_options() -> None:
    assert RbdSettings.from_conf(make_conf()) is None
    conf = make_conf(glance__allowed_direct_url_schemes=["rbd"], libvirt__rbd_user="nova",
                     libvirt__images_rbd_ceph_conf="/etc/ceph/other.conf")
    settings = RbdSettings.from_conf(conf)
    assert settings is not None
    assert (settings.user, settings.ceph_conf, settings.keyring) == (
        "nova", "/etc/ceph/other.conf", "/etc/ceph/ceph.client.nova.keyring")
    conf = make_conf(glance__enable_rbd_download=True, glance__rbd_user="compute",
                     glance__rbd_ceph_conf="/c/ceph.conf", glance__rbd_keyring="/k/key",
                     libvirt__rbd_user="nova")
    settings = RbdSettings.from_conf(conf)
    assert settings is not None
    assert (settings.user, settings.ceph_conf, settings.keyring, settings.connect_timeout,
            settings.osd_op_timeout) == ("compute", "/c/ceph.conf", "/k/key", 5, 30)


def test_only_rbd_is_an_allowed_scheme() -> None:
    with pytest.raises(ValueError):
        make_conf(glance__allowed_direct_url_schemes=["file"])
