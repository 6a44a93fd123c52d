"""The default policies: Nova's names where Nova has them, and admin-only."""

from __future__ import annotations

from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from fleetcache.api import policies, policy
from fleetcache.common import exception
from fleetcache.common.context import RequestContext

NOVA_NAMES = {
    "os_compute_api:os-aggregates:index", "os_compute_api:os-aggregates:create",
    "os_compute_api:os-aggregates:show", "os_compute_api:os-aggregates:update",
    "os_compute_api:os-aggregates:delete", "os_compute_api:os-aggregates:add_host",
    "os_compute_api:os-aggregates:remove_host", "os_compute_api:os-aggregates:set_metadata",
    "compute:aggregates:images", "os_compute_api:os-services:list",
}


def test_rule_names() -> None:
    names = {r.name for r in policies.list_rules()}
    fleetcache_names = {"fleetcache:aggregates:images:jobs", "fleetcache:images:show",
                        "fleetcache:status:show", "fleetcache:os-hosts:image-cache:list"}
    assert NOVA_NAMES | {"context_is_admin"} | fleetcache_names == names


def test_every_operation_rule_is_documented_and_admin_only() -> None:
    for rule in policies.list_rules():
        if rule.name == "context_is_admin":
            assert rule.check_str == "role:admin"
            continue
        assert isinstance(rule, oslo_policy.DocumentedRuleDefault)
        assert rule.check_str == "rule:context_is_admin"
        assert rule.operations and rule.description


def test_authorize() -> None:
    conf = cfg.ConfigOpts()
    conf([])
    enforcer = policy.get_enforcer(conf)
    admin = RequestContext(roles=["admin"], project_id="p")
    member = RequestContext(roles=["member", "reader"], project_id="p")
    policy.authorize(enforcer, admin, "compute:aggregates:images")
    assert policy.is_admin(enforcer, admin) and not policy.is_admin(enforcer, member)
    try:
        policy.authorize(enforcer, member, "compute:aggregates:images")
    except exception.PolicyNotAuthorized as exc:
        assert exc.code == 403 and "compute:aggregates:images" in str(exc)
    else:
        raise AssertionError("a member passed an admin-only rule")
