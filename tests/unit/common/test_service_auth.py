"""Tests of fleetcache.common.service_auth: a group's keystoneauth options, or one error naming
the group and the option to fix."""

from __future__ import annotations

import pytest
from oslo_config import cfg

from fleetcache.common import config, exception, service_auth


def _conf(group: str, **options: object) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    config.register_all(conf)
    conf([], project="fleetcache", default_config_files=[], default_config_dirs=[])
    for name, value in options.items():
        conf.set_override(name, value, group=group)
    return conf


@pytest.mark.parametrize("group", ["glance", "placement"])
def test_no_auth_type_is_a_session_without_service_auth(group: str) -> None:
    session, auth = service_auth.load_session(_conf(group), group)
    assert auth is None and session.auth is None


@pytest.mark.parametrize("group", ["glance", "placement"])
def test_unknown_auth_type_names_the_option_and_the_plugins(group: str) -> None:
    with pytest.raises(exception.InvalidConfiguration) as caught:
        service_auth.load_session(_conf(group, auth_type="bogus"), group)
    message = str(caught.value)
    assert message.startswith(f"Invalid configuration: [{group}] auth_type: there is no "
                              "keystoneauth plugin 'bogus'; use one of admin_token, ")
    assert ", password, " in message and ", v3password, " in message


def test_plugin_missing_a_required_option_names_it() -> None:
    with pytest.raises(exception.InvalidConfiguration) as caught:
        service_auth.load_session(_conf("placement", auth_type="password"), "placement")
    assert str(caught.value) == ("Invalid configuration: [placement] auth options: auth_type "
                                 "password needs auth_url; set them in [placement]")


def test_adapter_options_that_keystoneauth_refuses_name_the_group() -> None:
    conf = _conf("placement", auth_type="none", valid_interfaces=["public", "nonsense"])
    session, auth = service_auth.load_session(conf, "placement")
    with pytest.raises(exception.InvalidConfiguration,
                       match=r"^Invalid configuration: \[placement\] adapter options: "
                             "'nonsense' is not a valid value for valid_interfaces"):
        service_auth.load_adapter(conf, "placement", session, auth)


def test_adapter_of_good_options() -> None:
    conf = _conf("placement", auth_type="none", endpoint_override="http://127.0.0.1:1/")
    session, auth = service_auth.load_session(conf, "placement")
    adapter = service_auth.load_adapter(conf, "placement", session, auth, raise_exc=False)
    assert adapter.service_type == "placement" and adapter.raise_exc is False
    assert adapter.get_endpoint() == "http://127.0.0.1:1/"
