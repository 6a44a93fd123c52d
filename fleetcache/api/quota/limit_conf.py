"""The ``[oslo_limit]`` options: registered on the API's configuration, and handed to
oslo.limit.

oslo.limit reads its options only from the global ``cfg.CONF`` (``oslo_limit.limit.CONF``)
and keeps its Keystone connection process-wide; fleetcache passes a private ``ConfigOpts``
around instead. :func:`apply` is the one place that copies the API's ``[oslo_limit]`` values
there, by the public ``set_override``. The options are oslo.limit's (``endpoint_id``,
``endpoint_service_type``, ``endpoint_service_name``, ``endpoint_region_name``,
``endpoint_interface``) and keystoneauth's (the service user's ``auth_type`` and credentials,
the session's ``timeout``...), as in Nova's configuration. ``connect_retries`` defaults to
:data:`~fleetcache.common.service_auth.CONNECT_RETRIES` here (keystoneauth's own is none,
which the generated sample shows: it lists oslo.limit's options as oslo.limit builds them).
"""

from __future__ import annotations

from keystoneauth1 import exceptions as ksa_exceptions
from keystoneauth1 import loading
from oslo_config import cfg
from oslo_limit import opts as limit_opts

from fleetcache.common import service_auth

GROUP = "oslo_limit"


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register ``[oslo_limit]`` on ``conf`` (idempotent); the auth plugin's own options
    follow in :func:`apply`, once ``auth_type`` is known."""
    limit_opts.register_opts(conf)
    loading.register_session_conf_options(conf, GROUP)
    loading.register_adapter_conf_options(conf, GROUP, include_deprecated=False)
    loading.register_auth_conf_options(conf, GROUP)
    conf.set_default("connect_retries", service_auth.CONNECT_RETRIES, group=GROUP)


def _register_plugin_opts(conf: cfg.ConfigOpts, auth_type: str | None) -> None:
    """The options of the ``auth_type`` plugin; none for an unknown one (oslo.limit then
    fails to connect, which each request reports)."""
    if not auth_type:
        return
    try:
        plugin_opts = loading.get_auth_plugin_conf_options(auth_type)
    except ksa_exceptions.NoMatchingPlugin:
        return
    conf.register_opts(plugin_opts, group=GROUP)


def problem(conf: cfg.ConfigOpts) -> str | None:
    """What keeps oslo.limit from finding the limits with ``conf``'s ``[oslo_limit]``, as the
    end of a sentence, or ``None``."""
    register_opts(conf)
    group = conf[GROUP]
    if not group.auth_type:
        return ("[oslo_limit] auth_type is not set: give the service user the API reads "
                "Keystone's limits as (auth_type = password, auth_url, username, password, "
                "user_domain_name, project_name, project_domain_name)")
    try:
        loading.get_plugin_loader(group.auth_type)
    except ksa_exceptions.NoMatchingPlugin:
        return (f"[oslo_limit] auth_type {group.auth_type!r} is not a keystoneauth plugin: "
                "use password (or another plugin keystoneauth1 installs)")
    if not (group.endpoint_id or group.endpoint_service_type or group.endpoint_service_name):
        return ("[oslo_limit] names no endpoint whose limits apply: set endpoint_id, or "
                "endpoint_service_type = compute (with endpoint_region_name)")
    return None


def apply(conf: cfg.ConfigOpts) -> None:
    """Make oslo.limit use ``conf``'s ``[oslo_limit]`` (see the module's docstring)."""
    register_opts(conf)
    auth_type = conf[GROUP].auth_type
    _register_plugin_opts(conf, auth_type)
    if conf is cfg.CONF:
        return
    register_opts(cfg.CONF)
    _register_plugin_opts(cfg.CONF, auth_type)
    for name in conf[GROUP]:
        cfg.CONF.set_override(name, conf[GROUP][name], group=GROUP)
