"""Policy enforcement: one oslo.policy ``Enforcer`` per application, checks by rule name."""

from __future__ import annotations

from typing import Any

from oslo_config import cfg
from oslo_policy import policy

from fleetcache.api import policies
from fleetcache.common import exception
from fleetcache.common.context import RequestContext


def get_enforcer(conf: cfg.ConfigOpts) -> policy.Enforcer:
    """An enforcer with fleetcache's defaults, overridden by ``[oslo_policy] policy_file``."""
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(policies.list_rules())
    enforcer.load_rules()
    return enforcer


def authorize(
    enforcer: policy.Enforcer,
    context: RequestContext,
    action: str,
    target: dict[str, Any] | None = None,
) -> None:
    """:raises PolicyNotAuthorized: (403) when ``context`` may not perform ``action``."""
    if target is None:
        target = {"project_id": context.project_id, "user_id": context.user_id}
    try:
        enforcer.authorize(action, target, context, do_raise=True)
    except (policy.PolicyNotAuthorized, policy.InvalidScope) as exc:
        raise exception.PolicyNotAuthorized(action=action) from exc


def is_admin(enforcer: policy.Enforcer, context: RequestContext) -> bool:
    """Whether ``context`` passes ``context_is_admin``."""
    creds = context.to_policy_values()
    return bool(enforcer.enforce("context_is_admin", {}, creds))
