"""A small HTTP client of the fleetcache API, for the ``fleetcache`` CLI and the demo.

It speaks to ``/v2.1`` at microversion 2.81 (``OpenStack-API-Version: compute 2.81``).
Authentication is every OpenStack client's (:meth:`ApiClient.from_env`): a keystoneauth session
loaded by openstacksdk's config loader from ``clouds.yaml`` (``--os-cloud``/``OS_CLOUD``) or
the ``OS_*`` variables, with the compute endpoint from the catalog; a keystoneauth session
renews its token before it expires, so a long ``--wait`` outlives the first token. For noauth
labs, an explicit endpoint with a token (or ``OS_AUTH_TYPE=none``) skips Keystone. Errors
come back as :class:`ApiError` carrying the API's message.

Use::

    api = ApiClient.from_env(cloud="mycloud")          # or ApiClient("http://lab:8774/v2.1")
    agg = api.find_aggregate("edge-1")
    location = api.cache_images(agg["id"], [image_id])
    job = api.wait_job(location, on_update=print)
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import requests
from keystoneauth1 import exceptions as ks_exc

MICROVERSION = "2.81"
#: fleetcache's extension key of the pre-cache request body (docs/api.md, "Extension: pinning
#: the images for a while"): pin the images on the hosts for this many seconds.
PIN_KEY = "fleetcache:pin_seconds"
#: How a job's terms are spelled in the request body (docs/api.md, "Extension: a job's
#: terms"): ``fleetcache:<key>``, at :data:`TERMS_VERSION` of the fleetcache version axis.
TERMS_PREFIX = "fleetcache:"
TERMS_VERSION = "1.1"
#: The version header of a request with terms: both axes in the standard header.
TERMS_HEADER = f"compute {MICROVERSION}, fleetcache {TERMS_VERSION}"
#: ``catching_up`` ends a wait too: the first pass is over, and the hosts left ``pending`` are
#: caught up when they come back, which may be hours later (``[image_cache] catch_up_window``).
END_STATES = ("done", "failed", "catching_up")


class ApiError(Exception):
    """The API answered with an error (or could not be reached: ``status`` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status
        self.message = message


def versioned_endpoint(endpoint: str) -> str:
    """``http://h:p`` or ``http://h:p/v2.1/`` -> ``http://h:p/v2.1``."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v2.1") else endpoint + "/v2.1"


def _error_message(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or response.reason
    if isinstance(body, Mapping) and len(body) == 1:  # Nova's {"badRequest": {"message": ..}}
        inner = next(iter(body.values()))
        if isinstance(inner, Mapping) and "message" in inner:
            return str(inner["message"])
    return str(body)


class ApiClient:
    """The calls the CLI needs, on one ``requests`` session."""

    def __init__(
        self,
        endpoint: str,
        token: str | None = None,
        timeout: float = 60.0,
        session: requests.Session | None = None,
        token_source: Callable[[], str | None] | None = None,
    ) -> None:
        """:param token_source: called before each request for the ``X-Auth-Token`` to send
            (a keystoneauth session's ``get_token``: cached, renewed when near expiry)."""
        self.endpoint = versioned_endpoint(endpoint)
        self.timeout = timeout
        self.token_source = token_source
        self.session = session or requests.Session()
        self.session.headers.update({
            "Accept": "application/json",
            "OpenStack-API-Version": f"compute {MICROVERSION}",
            "X-OpenStack-Nova-API-Version": MICROVERSION,
        })
        if token:
            self.session.headers["X-Auth-Token"] = token

    @classmethod
    def from_env(
        cls,
        endpoint: str | None = None,
        token: str | None = None,
        timeout: float = 60.0,
        cloud: str | None = None,
        region: str | None = None,
    ) -> ApiClient:
        """The client the arguments and the environment describe.

        Without a cloud (``cloud``/``OS_CLOUD``), an endpoint (``endpoint``/``OS_ENDPOINT``)
        with a token (``token``/``OS_TOKEN``), with ``OS_AUTH_TYPE=none`` or without
        ``OS_AUTH_URL`` is used as given: noauth labs. Anything else goes through
        keystoneauth: ``clouds.yaml`` or the ``OS_*`` variables (``OS_AUTH_URL``,
        ``OS_USERNAME``...), the endpoint from the catalog (service type ``compute``,
        ``OS_INTERFACE``, ``OS_REGION_NAME``) unless one is given.

        :raises ApiError: (status 0) when the credentials are missing or refused, or the
            catalog has no compute endpoint.
        """
        endpoint = endpoint or os.environ.get("OS_ENDPOINT")
        token = token or os.environ.get("OS_TOKEN")
        cloud = cloud or os.environ.get("OS_CLOUD")
        no_auth = os.environ.get("OS_AUTH_TYPE") in ("none", "noauth")
        no_keystone = not os.environ.get("OS_AUTH_URL")
        if endpoint and not cloud and (token or no_auth or no_keystone):
            return cls(endpoint, token=token, timeout=timeout)
        session, endpoint = _keystone_session(cloud, region, endpoint)
        return cls(endpoint, timeout=timeout, token_source=session.get_token)

    # -- plumbing ---------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return path if "://" in path else self.endpoint + path

    def request(self, method: str, path: str, body: Any = None,
                headers: Mapping[str, str] | None = None) -> requests.Response:
        """One request (``headers`` beside the session's); :raises ApiError: on a connection
        failure or a status >= 400."""
        headers = dict(headers or {})
        try:
            if self.token_source is not None:
                headers["X-Auth-Token"] = self.token_source() or ""
            response = self.session.request(
                method, self.url(path), json=body, timeout=self.timeout, headers=headers
            )
        except ks_exc.ClientException as exc:  # a token refused or not renewed
            raise ApiError(0, f"Keystone: {exc}") from exc
        except requests.RequestException as exc:
            raise ApiError(0, f"cannot reach the API at {self.url(path)}: {exc}; check "
                           "--os-endpoint (or OS_ENDPOINT) and that fleetcache-api runs there"
                           ) from exc
        if response.status_code >= 400:
            raise ApiError(response.status_code, _error_message(response))
        return response

    def get(self, path: str) -> Any:
        return self.request("GET", path).json()

    # -- aggregates -------------------------------------------------------------------------

    def list_aggregates(self) -> list[dict[str, Any]]:
        return list(self.get("/os-aggregates")["aggregates"])

    def find_aggregate(self, ident: str) -> dict[str, Any]:
        """An aggregate by id, uuid or name. :raises ApiError: 404 when none matches."""
        aggregates = self.list_aggregates()
        for key in ("id", "uuid", "name"):
            for agg in aggregates:
                if str(agg.get(key)) == ident:
                    return agg
        raise ApiError(404, f"no aggregate with id, uuid or name {ident!r}")

    def create_aggregate(self, name: str, zone: str | None = None) -> dict[str, Any]:
        body = {"aggregate": {"name": name, "availability_zone": zone}}
        return dict(self.request("POST", "/os-aggregates", body).json()["aggregate"])

    def add_host(self, aggregate_id: int, host: str) -> dict[str, Any]:
        body = {"add_host": {"host": host}}
        response = self.request("POST", f"/os-aggregates/{aggregate_id}/action", body)
        return dict(response.json()["aggregate"])

    # -- pre-cache jobs ---------------------------------------------------------------------

    def cache_images(self, aggregate_id: int, image_ids: list[str],
                     pin_seconds: int | None = None,
                     terms: Mapping[str, Any] | None = None) -> str:
        """Ask for a pre-cache; :returns: the job's URL (the ``Location`` header).

        :param pin_seconds: pin the images on the hosts for this many seconds (the body's
            :data:`PIN_KEY`); the API judges the range and answers 400 naming the limit.
        :param terms: the job's terms (``not_before``, ``window``...: the keys of
            docs/api.md without their prefix), sent as ``fleetcache:<key>`` with
            ``OpenStack-API-Version: ...fleetcache 1.1`` when not empty; the API judges them
            against the operator's caps and answers 400 naming the key.
        """
        body: dict[str, Any] = {"cache": [{"id": image_id} for image_id in image_ids]}
        if pin_seconds is not None:
            body[PIN_KEY] = pin_seconds
        headers: dict[str, str] = {}
        if terms:
            body.update({TERMS_PREFIX + key: value for key, value in terms.items()})
            headers["OpenStack-API-Version"] = TERMS_HEADER
        response = self.request("POST", f"/os-aggregates/{aggregate_id}/images", body,
                                headers=headers)
        location = response.headers.get("Location")
        if not location:
            raise ApiError(response.status_code, "the API named no job (no Location header)")
        return location

    def job_path(self, aggregate_id: int, job_id: str) -> str:
        return f"/os-aggregates/{aggregate_id}/images/jobs/{job_id}"

    def get_job(self, location: str) -> dict[str, Any]:
        return dict(self.get(location)["job"])

    def list_jobs(self, aggregate_id: int) -> list[dict[str, Any]]:
        return list(self.get(f"/os-aggregates/{aggregate_id}/images/jobs")["jobs"])

    def find_job(self, job_id: str, aggregate: str | None = None) -> dict[str, Any]:
        """A job by uuid, searching every aggregate's jobs unless ``aggregate`` is given."""
        candidates = (
            [self.find_aggregate(aggregate)] if aggregate else self.list_aggregates()
        )
        for agg in candidates:
            if any(j["id"] == job_id for j in self.list_jobs(agg["id"])):
                return self.get_job(self.job_path(agg["id"], job_id))
        raise ApiError(404, f"no pre-cache job {job_id}")

    def wait_job(
        self,
        location: str,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        interval: float = 0.5,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Poll the job until it is ``done`` or ``failed``.

        :raises ApiError: status 0 when ``timeout`` seconds pass first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.get_job(location)
            if on_update is not None:
                on_update(job)
            if job["state"] in END_STATES:
                return job
            if deadline is not None and time.monotonic() > deadline:
                raise ApiError(0, f"job {job['id']} still {job['state']} after {timeout} s")
            time.sleep(interval)

    # -- compute hosts ----------------------------------------------------------------------

    def get_host_image_cache(self, host: str) -> dict[str, Any]:
        """``host``'s image cache as it last reported it (``GET /os-hosts/{host}/image-cache``).

        :raises ApiError: 404 when no compute has that name.
        """
        path = f"/os-hosts/{urllib.parse.quote(host, safe='')}/image-cache"
        return dict(self.get(path)["image_cache"])


def _keystone_session(cloud: str | None, region: str | None,
                      endpoint: str | None) -> tuple[Any, str]:
    """A keystoneauth session from ``clouds.yaml``/``OS_*`` (openstacksdk's loader, as the
    ``openstack`` client reads them) and the compute endpoint (``endpoint`` when given)."""
    # Imported here: openstacksdk's config loader takes ~0.3 s to import, which the noauth
    # path and `fleetcache demo` need not pay.
    from openstack import exceptions as sdk_exc
    from openstack.config import loader

    try:
        cloud_region = loader.OpenStackConfig().get_one(cloud=cloud, region_name=region)
        session = cloud_region.get_session()
        if not endpoint:
            endpoint = cloud_region.get_session_endpoint("compute")
    except (ks_exc.ClientException, sdk_exc.SDKException) as exc:
        raise ApiError(0, f"cannot authenticate ({type(exc).__name__}: {exc}); set "
                       "--os-cloud/OS_CLOUD or OS_AUTH_URL, OS_USERNAME... (or, for a noauth "
                       "lab, --os-endpoint with --os-token)") from exc
    if not endpoint:
        raise ApiError(0, "no compute endpoint in the Keystone catalog; pass --os-endpoint")
    return session, str(endpoint)

