"""Keystoneauth sessions and adapters from an option group (``[glance]``, ``[placement]``).

The one place fleetcache turns a group's keystoneauth options into a session: a mistake in
them (an unknown ``auth_type``, a plugin's required option left out, contradictory adapter
options) becomes :class:`~fleetcache.common.exception.InvalidConfiguration` naming the group
and the option, which a daemon reports as one line at start-up. Use::

    session, auth = service_auth.load_session(conf, "glance", app_name="fleetcache")
    adapter = service_auth.load_adapter(conf, "placement", session, auth)
"""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import plugin as ks_plugin
from keystoneauth1 import session as ks_session
from keystoneauth1.loading import adapter as ks_adapter_loading
from oslo_config import cfg
from stevedore import ExtensionManager

from fleetcache.common import exception

#: keystoneauth's entry point namespace of auth plugin loaders.
PLUGIN_NAMESPACE = "keystoneauth1.plugin"
#: ``connect_retries`` of the services fleetcache calls through keystoneauth's adapters
#: (``[placement]``, ``[oslo_limit]``), where keystoneauth retries none. A service behind a
#: keep-alive server (gunicorn 2 s, Apache 5 s) closes an idle pooled connection as the next
#: request goes out on it: "Connection reset by peer". keystoneauth waits 0.5 s before the
#: first retry, 1 s before the second, and retries a timed-out attempt too, so a group's
#: ``timeout`` is per attempt (docs/api.md, "Quotas", has the figures).
CONNECT_RETRIES = 2


def load_session(
    conf: cfg.ConfigOpts, group: str, **session_kwargs: Any
) -> tuple[ks_session.Session, ks_plugin.BaseAuthPlugin | None]:
    """The session of ``[group]`` and its auth plugin (``None``: no ``auth_type``, no service
    auth).

    :param session_kwargs: passed to keystoneauth's session loader (``app_name``, ...).
    :raises InvalidConfiguration: naming ``[group]`` and the option to fix.
    """
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, group)
        session = ks_loading.load_session_from_conf_options(
            conf, group, auth=auth, **session_kwargs)
    except ks_exc.NoMatchingPlugin as exc:
        raise exception.InvalidConfiguration(
            reason=f"[{group}] auth_type: there is no keystoneauth plugin {exc.name!r}; use "
            f"one of {', '.join(_plugin_names())}") from exc
    except ks_exc.MissingRequiredOptions as exc:
        missing = ", ".join(opt.dest for opt in exc.options)
        raise exception.InvalidConfiguration(
            reason=f"[{group}] auth options: auth_type {conf[group].auth_type} needs "
            f"{missing}; set them in [{group}]") from exc
    except ks_exc.ClientException as exc:
        raise exception.InvalidConfiguration(reason=f"[{group}] auth options: {exc}") from exc
    return session, auth


def load_adapter(
    conf: cfg.ConfigOpts, group: str, session: ks_session.Session,
    auth: ks_plugin.BaseAuthPlugin | None, **adapter_kwargs: Any,
) -> ks_adapter.Adapter:
    """The adapter of ``[group]`` (service type, interfaces, endpoint) on ``session``.

    :raises InvalidConfiguration: naming ``[group]``, for adapter options that contradict each
        other or an unknown ``valid_interfaces`` entry (keystoneauth's ``TypeError``, caught
        around the reading of the options only).
    """
    try:
        ks_adapter_loading.process_conf_options(conf[group], dict(adapter_kwargs))
    except TypeError as exc:
        raise exception.InvalidConfiguration(
            reason=f"[{group}] adapter options: {exc}") from exc
    adapter: ks_adapter.Adapter = ks_loading.load_adapter_from_conf_options(
        conf, group, session=session, auth=auth, **adapter_kwargs)
    return adapter


def _plugin_names() -> list[str]:
    """The keystoneauth plugins that load here: ``get_available_plugin_names()`` without the
    errors stevedore logs for those whose libraries are missing (lxml for
    ``v3samlpassword``)."""
    manager: ExtensionManager[Any] = ExtensionManager(
        PLUGIN_NAMESPACE, invoke_on_load=True, on_load_failure_callback=_skip_plugin)
    return sorted({ext.name for ext in manager if ext.obj is not None and ext.obj.available})


def _skip_plugin(manager: ExtensionManager[Any], entry_point: EntryPoint,
                 exc: BaseException) -> None:
    """A plugin that does not load is not listed."""
