"""The default policies: Nova's names and defaults where Nova has them (admin-only but for
servers, which a project's members own, and flavor reads, open to all), project scope; the base
rules are Nova's new-default aliases."""

from __future__ import annotations

from oslo_config import cfg
from oslo_policy import policy as oslo_policy

from fleetcache.api import policies, policy
from fleetcache.api.policies import base
from fleetcache.common import exception
from fleetcache.common.context import RequestContext

NOVA_NAMES = {
    "os_compute_api:os-aggregates:index", "os_compute_api:os-aggregates:create",
    "os_compute_api:os-aggregates:show", "os_compute_api:os-aggregates:update",
    "os_compute_api:os-aggregates:delete", "os_compute_api:os-aggregates:add_host",
    "os_compute_api:os-aggregates:remove_host", "os_compute_api:os-aggregates:set_metadata",
    "compute:aggregates:images", "os_compute_api:os-services:list",
    "os_compute_api:os-flavor-manage:create", "os_compute_api:os-flavor-manage:update",
    "os_compute_api:os-flavor-manage:delete",
    "os_compute_api:os-flavor-extra-specs:index", "os_compute_api:os-flavor-extra-specs:show",
    "os_compute_api:os-flavor-extra-specs:create",
    "os_compute_api:os-flavor-extra-specs:update",
    "os_compute_api:os-flavor-extra-specs:delete",
    "os_compute_api:servers:index", "os_compute_api:servers:detail",
    "os_compute_api:servers:index:get_all_tenants", "os_compute_api:servers:show",
    "os_compute_api:servers:create", "os_compute_api:servers:create:forced_host",
    "os_compute_api:servers:delete", "os_compute_api:servers:rebuild",
    "os_compute_api:os-extended-server-attributes",
    "os_compute_api:os-hypervisors:list", "os_compute_api:os-hypervisors:list-detail",
    "os_compute_api:os-hypervisors:show", "os_compute_api:os-hypervisors:statistics",
    "os_compute_api:os-hypervisors:uptime", "os_compute_api:os-hypervisors:search",
    "os_compute_api:os-hypervisors:servers", "os_compute_api:os-flavor-access",
    "os_compute_api:os-flavor-access:add_tenant_access",
    "os_compute_api:os-flavor-access:remove_tenant_access",
    "os_compute_api:os-availability-zone:list", "os_compute_api:os-availability-zone:detail",
    "os_compute_api:extensions", "os_compute_api:servers:update", "os_compute_api:servers:stop",
    "os_compute_api:servers:start",
    "os_compute_api:limits", "os_compute_api:limits:other_project",
    "os_compute_api:os-quota-sets:show", "os_compute_api:os-quota-sets:detail",
    "os_compute_api:os-quota-sets:defaults", "os_compute_api:os-quota-sets:update",
    "os_compute_api:os-quota-sets:delete",
    "os_compute_api:server-metadata:index", "os_compute_api:server-metadata:show",
    "os_compute_api:server-metadata:create", "os_compute_api:server-metadata:update_all",
    "os_compute_api:server-metadata:update", "os_compute_api:server-metadata:delete",
}
#: Open to anyone, as in Nova (``RULE_ANY``), or fleetcache's reads open to all.
ANYONE = {"fleetcache:flavors:list", "fleetcache:networks:show",
          "os_compute_api:os-availability-zone:list", "os_compute_api:extensions",
          "os_compute_api:limits", "os_compute_api:os-quota-sets:defaults"}
#: Not admin-only, as in Nova.
PROJECT_READ = {"os_compute_api:os-flavor-extra-specs:index",
                "os_compute_api:os-flavor-extra-specs:show", "os_compute_api:servers:index",
                "os_compute_api:servers:detail", "os_compute_api:servers:show",
                "os_compute_api:os-quota-sets:show", "os_compute_api:os-quota-sets:detail",
                "os_compute_api:server-metadata:index", "os_compute_api:server-metadata:show"}
PROJECT_WRITE = {"os_compute_api:servers:create", "os_compute_api:servers:delete",
                 "os_compute_api:servers:rebuild", "os_compute_api:servers:update",
                 "os_compute_api:servers:stop", "os_compute_api:servers:start",
                 "os_compute_api:server-metadata:create",
                 "os_compute_api:server-metadata:update_all",
                 "os_compute_api:server-metadata:update", "os_compute_api:server-metadata:delete"}


def test_rule_names() -> None:
    names = {r.name for r in policies.list_rules()}
    fleetcache_names = {"fleetcache:aggregates:images:jobs", "fleetcache:images:show",
                        "fleetcache:flavors:list", "fleetcache:status:show",
                        "fleetcache:os-hosts:image-cache:list", "fleetcache:networks:show"}
    base_names = {r.name for r in base.list_rules()}
    assert NOVA_NAMES | base_names | fleetcache_names == names


def test_base_aliases_name_base_rules() -> None:
    base_names = {r.name for r in base.list_rules()}
    for alias in (base.ADMIN, base.PROJECT_MANAGER_OR_ADMIN, base.PROJECT_MEMBER_OR_ADMIN,
                  base.PROJECT_READER_OR_ADMIN, base.SERVICE_OR_ADMIN):
        assert alias.removeprefix("rule:") in base_names


def test_every_operation_rule_is_documented_with_novas_default() -> None:
    base_names = {r.name for r in base.list_rules()}
    for rule in policies.list_rules():
        if rule.name in base_names:
            assert not isinstance(rule, oslo_policy.DocumentedRuleDefault)
            continue
        assert isinstance(rule, oslo_policy.DocumentedRuleDefault)
        expected = (base.PROJECT_READER_OR_ADMIN if rule.name in PROJECT_READ else
                    base.PROJECT_MEMBER_OR_ADMIN if rule.name in PROJECT_WRITE else
                    base.ANY if rule.name in ANYONE else base.ADMIN)
        assert rule.check_str == expected, rule.name
        assert rule.scope_types == ["project"]
        assert rule.operations and rule.description


def test_project_rules() -> None:
    enforcer = _enforcer()
    mine = {"project_id": "p", "user_id": "u"}
    reader = RequestContext(roles=["reader"], project_id="p")
    member = RequestContext(roles=["member", "reader"], project_id="p")
    stranger = RequestContext(roles=["member", "reader"], project_id="q")
    policy.authorize(enforcer, reader, "os_compute_api:servers:show", mine)
    policy.authorize(enforcer, member, "os_compute_api:servers:create", mine)
    for ctxt, rule in ((reader, "os_compute_api:servers:delete"),
                       (stranger, "os_compute_api:servers:show")):
        try:
            policy.authorize(enforcer, ctxt, rule, mine)
        except exception.PolicyNotAuthorized:
            continue
        raise AssertionError(f"{rule} allowed")


def _enforcer() -> oslo_policy.Enforcer:
    conf = cfg.ConfigOpts()
    conf([])
    return policy.get_enforcer(conf)


def test_project_aliases_need_the_targets_project_or_admin() -> None:
    enforcer = _enforcer()
    reader = RequestContext(roles=["reader"], project_id="p1")
    member = RequestContext(roles=["member", "reader"], project_id="p1")
    admin = RequestContext(roles=["admin", "member", "reader"], project_id="p0")
    own, other = {"project_id": "p1"}, {"project_id": "p2"}

    def allowed(alias: str, ctx: RequestContext, target: dict[str, str]) -> bool:
        return bool(enforcer.enforce(alias.removeprefix("rule:"), target, ctx))

    assert allowed(base.PROJECT_READER_OR_ADMIN, reader, own)
    assert not allowed(base.PROJECT_READER_OR_ADMIN, reader, other)
    assert not allowed(base.PROJECT_MEMBER_OR_ADMIN, reader, own)
    assert allowed(base.PROJECT_MEMBER_OR_ADMIN, member, own)
    assert not allowed(base.PROJECT_MEMBER_OR_ADMIN, member, other)
    assert allowed(base.PROJECT_MEMBER_OR_ADMIN, admin, other)
    assert not allowed(base.ADMIN, member, own)


def test_authorize() -> None:
    enforcer = _enforcer()
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
