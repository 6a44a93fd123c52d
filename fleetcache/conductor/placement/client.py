"""HTTP to OpenStack Placement: a keystoneauth Session + Adapter built from ``[placement]``.

Each method is one request at microversion :data:`MICROVERSION` and returns plain data; the
generation-aware writes raise :class:`GenerationConflict` on Placement's
``placement.concurrent_update`` 409, which :mod:`fleetcache.conductor.placement.provider`
retries. Anything else unexpected (an error status, an unreachable endpoint) raises
:class:`~fleetcache.common.exception.PlacementError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from fleetcache.common import exception, service_auth

#: 1.36 is Placement Train: provider-generation-checked aggregates (1.19), ``POST
#: /resource_providers`` returning the provider (1.20), ``in:`` and ``!`` in ``member_of``
#: (1.21, 1.32), ``root_required`` (1.35); ``PUT /allocations`` with a null consumer generation
#: for a new consumer (1.28) and the ``mappings`` of an allocation request (1.34).
#: openstack-placement 16.0.0 serves up to 1.39.
MICROVERSION = "1.36"

#: Placement's error code for a write whose generation is no longer the provider's.
CONCURRENT_UPDATE = "placement.concurrent_update"


class GenerationConflict(Exception):
    """The provider's generation moved on since it was read: read again and retry."""


def _error_code(response: Any) -> str | None:
    try:
        errors = response.json().get("errors") or [{}]
        code = errors[0].get("code")
    except (ValueError, AttributeError):
        return None
    return str(code) if code else None


class PlacementClient:
    """Calls one Placement through ``adapter`` (service type ``placement``)."""

    def __init__(self, adapter: ks_adapter.Adapter) -> None:
        self._adapter = adapter

    @classmethod
    def from_conf(cls, conf: cfg.ConfigOpts) -> PlacementClient | None:
        """The client ``[placement]`` describes, or ``None`` when ``auth_type`` is unset
        (Placement not configured).

        :raises InvalidConfiguration: for a mistake in the ``[placement]`` keystoneauth options
            (an unknown ``auth_type``, a required option of its plugin missing).
        """
        group = "placement"
        if not conf.placement.auth_type:
            return None
        session, auth = service_auth.load_session(conf, group)
        adapter = service_auth.load_adapter(
            conf, group, session, auth, raise_exc=False, default_microversion=MICROVERSION)
        return cls(adapter)

    # -- plumbing ---------------------------------------------------------------------------

    def _request(self, method: str, url: str, ok: tuple[int, ...], **kwargs: Any) -> Any:
        try:
            response = self._adapter.request(url, method, **kwargs)
        except ks_exc.ClientException as exc:  # connection refused, timeout, no endpoint
            raise exception.PlacementError(method=method, url=url, reason=str(exc)) from exc
        if response.status_code in ok:
            return response
        if response.status_code == 409 and _error_code(response) == CONCURRENT_UPDATE:
            raise GenerationConflict(url)
        raise exception.PlacementError(
            method=method, url=url,
            reason=f"HTTP {response.status_code}: {response.text.strip()[:500]}")

    # -- resource providers -----------------------------------------------------------------

    def get_provider(self, uuid: str) -> dict[str, Any] | None:
        """The provider, or ``None`` when Placement has none with ``uuid``."""
        response = self._request("GET", f"/resource_providers/{uuid}", ok=(200, 404))
        return None if response.status_code == 404 else dict(response.json())

    def create_provider(self, uuid: str, name: str) -> dict[str, Any] | None:
        """Create a root provider; ``None`` when one with ``uuid`` appeared meanwhile.

        :raises PlacementError: also when another provider already has ``name``.
        """
        response = self._request("POST", "/resource_providers",
                                 json={"uuid": uuid, "name": name}, ok=(200, 409))
        if response.status_code == 409:
            if self.get_provider(uuid) is not None:
                return None
            raise exception.PlacementError(
                method="POST", url="/resource_providers",
                reason=f"HTTP 409: {response.text.strip()[:500]}")
        return dict(response.json())

    def list_providers(self, **query: str) -> list[dict[str, Any]]:
        response = self._request("GET", "/resource_providers", ok=(200,), params=query)
        return list(response.json()["resource_providers"])

    def delete_provider(self, uuid: str) -> None:
        self._request("DELETE", f"/resource_providers/{uuid}", ok=(204, 404))

    # -- inventories, traits, aggregates: (generation, value) reads, generation-checked writes

    def get_inventories(self, uuid: str) -> tuple[int, dict[str, dict[str, Any]]]:
        body = self._request("GET", f"/resource_providers/{uuid}/inventories", ok=(200,)).json()
        return int(body["resource_provider_generation"]), dict(body["inventories"])

    def put_inventories(
        self, uuid: str, generation: int, inventories: dict[str, dict[str, Any]]
    ) -> int:
        """:raises GenerationConflict:"""
        body = self._request(
            "PUT", f"/resource_providers/{uuid}/inventories", ok=(200,),
            json={"resource_provider_generation": generation, "inventories": inventories},
        ).json()
        return int(body["resource_provider_generation"])

    def get_traits(self, uuid: str) -> tuple[int, set[str]]:
        body = self._request("GET", f"/resource_providers/{uuid}/traits", ok=(200,)).json()
        return int(body["resource_provider_generation"]), set(body["traits"])

    def put_traits(self, uuid: str, generation: int, traits: set[str]) -> int:
        """:raises GenerationConflict:"""
        body = self._request(
            "PUT", f"/resource_providers/{uuid}/traits", ok=(200,),
            json={"resource_provider_generation": generation, "traits": sorted(traits)},
        ).json()
        return int(body["resource_provider_generation"])

    def ensure_custom_trait(self, name: str) -> None:
        """Create ``CUSTOM_*`` trait ``name`` unless it exists (201 or 204)."""
        self._request("PUT", f"/traits/{name}", ok=(201, 204))

    def get_aggregates(self, uuid: str) -> tuple[int, set[str]]:
        body = self._request("GET", f"/resource_providers/{uuid}/aggregates", ok=(200,)).json()
        return int(body["resource_provider_generation"]), set(body["aggregates"])

    def put_aggregates(self, uuid: str, generation: int, aggregates: set[str]) -> int:
        """:raises GenerationConflict:"""
        body = self._request(
            "PUT", f"/resource_providers/{uuid}/aggregates", ok=(200,),
            json={"resource_provider_generation": generation, "aggregates": sorted(aggregates)},
        ).json()
        return int(body["resource_provider_generation"])

    # -- scheduling: candidates and allocations ----------------------------------------------

    def get_allocation_candidates(self, params: list[tuple[str, str]]) -> dict[str, Any]:
        """``GET /allocation_candidates`` with ``params`` (``member_of`` may repeat).

        :raises PlacementError: also for a 400 (a malformed query is fleetcache's bug).
        """
        return dict(self._request("GET", "/allocation_candidates", ok=(200,),
                                  params=params).json())

    def claim_allocation(
        self, consumer: str, allocation_request: Mapping[str, Any], project_id: str,
        user_id: str,
    ) -> bool:
        """``PUT /allocations/{consumer}`` of a new consumer (``consumer_generation`` null).

        After a 409 (the provider's generation moved, no room, or the consumer exists) the
        consumer's allocations are read: a PUT that keystoneauth sent again
        (``connect_retries``: Placement had applied it, and its answer was lost) meets its own
        claim, which holds.

        :returns: False when Placement refused it with a 409: the provider no longer has room
            (another claim got in first), or ``consumer`` already holds other allocations.
        """
        body = dict(allocation_request)
        body.update(project_id=project_id, user_id=user_id, consumer_generation=None)
        response = self._request("PUT", f"/allocations/{consumer}", ok=(204, 409), json=body)
        return response.status_code == 204 or self._holds(consumer, allocation_request)

    def _holds(self, consumer: str, allocation_request: Mapping[str, Any]) -> bool:
        """Whether ``consumer`` holds exactly the resources ``allocation_request`` asks for."""
        held = {rp: dict(alloc["resources"])
                for rp, alloc in self.get_allocations(consumer).items()}
        asked = {rp: dict(alloc["resources"])
                 for rp, alloc in allocation_request["allocations"].items()}
        return held == asked

    def delete_allocation(self, consumer: str) -> None:
        """``DELETE /allocations/{consumer}``; none to delete (404) is fine."""
        self._request("DELETE", f"/allocations/{consumer}", ok=(204, 404))

    def get_allocations(self, consumer: str) -> dict[str, Any]:
        """``{provider uuid: {"resources": {...}}}`` held by ``consumer`` (empty: none)."""
        body = self._request("GET", f"/allocations/{consumer}", ok=(200,)).json()
        return dict(body.get("allocations", {}))

    def get_usages(self, uuid: str) -> dict[str, int]:
        """``{resource class: used}`` of one provider."""
        body = self._request("GET", f"/resource_providers/{uuid}/usages", ok=(200,)).json()
        return dict(body["usages"])
