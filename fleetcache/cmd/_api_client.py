"""A small HTTP client of the fleetcache API, for the ``fleetcache`` CLI and the demo.

It speaks to ``/v2.1`` at microversion 2.81 (``OpenStack-API-Version: compute 2.81``), with
no authentication, a given token (``X-Auth-Token``) or a keystoneauth session built from the
usual ``OS_*`` variables. Errors come back as :class:`ApiError` carrying the API's message.

Use::

    api = ApiClient("http://127.0.0.1:18774/v2.1")
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

MICROVERSION = "2.81"
END_STATES = ("done", "failed")


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
    ) -> None:
        self.endpoint = versioned_endpoint(endpoint)
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers.update({
            "Accept": "application/json",
            "OpenStack-API-Version": f"compute {MICROVERSION}",
            "X-OpenStack-Nova-API-Version": MICROVERSION,
        })
        if token:
            self.session.headers["X-Auth-Token"] = token

    @classmethod
    def from_env(cls, endpoint: str | None, token: str | None, timeout: float = 60.0) -> ApiClient:
        """Build from arguments, else ``OS_ENDPOINT``/``OS_TOKEN``, else keystoneauth's
        ``OS_AUTH_URL`` and friends (the compute endpoint then comes from the catalog).

        :raises ApiError: when no endpoint can be found.
        """
        endpoint = endpoint or os.environ.get("OS_ENDPOINT")
        token = token or os.environ.get("OS_TOKEN")
        auth_type = os.environ.get("OS_AUTH_TYPE", "password")
        if not token and os.environ.get("OS_AUTH_URL") and auth_type != "none":
            token, endpoint = _keystone_token(auth_type, endpoint)
        if not endpoint:
            raise ApiError(0, "no API endpoint: pass --os-endpoint or set OS_ENDPOINT")
        return cls(endpoint, token=token, timeout=timeout)

    # -- plumbing ---------------------------------------------------------------------------

    def url(self, path: str) -> str:
        return path if "://" in path else self.endpoint + path

    def request(self, method: str, path: str, body: Any = None) -> requests.Response:
        """One request; :raises ApiError: on a connection failure or a status >= 400."""
        try:
            response = self.session.request(
                method, self.url(path), json=body, timeout=self.timeout
            )
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

    def cache_images(self, aggregate_id: int, image_ids: list[str]) -> str:
        """Ask for a pre-cache; :returns: the job's URL (the ``Location`` header)."""
        body = {"cache": [{"id": image_id} for image_id in image_ids]}
        response = self.request("POST", f"/os-aggregates/{aggregate_id}/images", body)
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


def _keystone_token(auth_type: str, endpoint: str | None) -> tuple[str, str | None]:
    """A token (and the compute endpoint, when not given) from keystoneauth's env options."""
    from keystoneauth1 import loading
    from keystoneauth1 import session as ks_session

    loader: Any = loading.get_plugin_loader(auth_type)
    values: dict[str, str] = {}
    for opt in loader.get_options():
        value = os.environ.get("OS_" + opt.dest.upper())
        if value is not None:
            values[opt.dest] = value
    session = ks_session.Session(auth=loader.load_from_options(**values))
    token = session.get_token()
    if not token:
        raise ApiError(0, f"keystone ({auth_type}) gave no token")
    if not endpoint:
        endpoint = session.get_endpoint(service_type="compute", interface="public")
    return token, endpoint
