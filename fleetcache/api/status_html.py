"""The status page's HTML: server-rendered, every value escaped, script and style inline and
allowed by their hashes in a strict Content-Security-Policy.

Nothing here reads the database: :mod:`fleetcache.api.handlers.status` gathers a
:class:`StatusView` and :func:`render_page` turns it into a document. Aggregates and images
are shown by name (the id beside or on hover) where the view knows one, by id otherwise.
Image ids and names, aggregate names, host names and reasons come from clients, computes and
the image service, so they are untrusted: each goes through
:func:`html.escape` (quotes included) and nothing is ever placed in a script, a style or a URL.
The script (``static/status.js``) updates running jobs' progress from the JSON feed with
``textContent`` only.

The policy allows exactly the page's own inline script and style (by SHA-256) and fetches to
its own origin; no frame may embed the page, no form may post anywhere, no other resource
loads. Its reader is an admin holding a token, so the page is never cached.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
from importlib import resources
from typing import Any

#: The cookie the sign-in form keeps a pasted Keystone token in (read on the status paths only:
#: :mod:`fleetcache.api.status_auth`).
TOKEN_COOKIE = "fleetcache_status_token"
#: How often the page polls the progress feed.
POLL_MS = 2000

SCRIPT = resources.files("fleetcache.api").joinpath("static/status.js").read_text("utf-8")
STYLE = """
body { font: 14px/1.4 sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .4em 0; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; }
.cached, .existing, .done { background: #e3f6e3; }
.error, .failed { background: #fbe0e0; }
.skipped, .unsupported { background: #fff4d6; }
.running, .queued { background: #e2ecfb; }
.scheduled { background: #ede4f7; }
.reason { display: block; font-size: .9em; color: #633; white-space: pre-wrap; }
.muted { color: #777; }
"""


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; script-src {_sha256(SCRIPT)}; style-src {_sha256(STYLE)}; "
    "connect-src 'self'; img-src 'none'; form-action 'none'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
#: Headers of every status page response (the sign-in page's too).
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@dataclasses.dataclass(frozen=True)
class StatusView:
    """What the page shows, gathered by the handler.

    :ivar jobs: the newest jobs as the jobs API formats them with ``detail`` (newest first).
    :ivar caches: each host's cache report (``host``, ``usage_bytes``, ``image_count``,
        ``reported_at``); keys added later (pins) are shown when present.
    :ivar aggregate_names: aggregate uuid -> name, for the jobs' aggregates that still exist.
    :ivar image_names: image id -> name, for the images whose name is known; the others
        show as their id.
    :ivar progress_url: the progress feed the script polls.
    :ivar cookie_path: the path the sign-in cookie is scoped to.
    """

    jobs: list[dict[str, Any]]
    caches: list[dict[str, Any]]
    aggregate_names: dict[str, str]
    image_names: dict[str, str]
    progress_url: str
    cookie_path: str
    token_cookie: bool


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _document(title: str, body: str, attributes: dict[str, str]) -> str:
    attrs = "".join(f' {name}="{_e(value)}"' for name, value in attributes.items())
    return (
        f"<!DOCTYPE html>\n<html lang=\"en\"{attrs}>\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{_e(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n"
        f"<script>{SCRIPT}</script>\n</body>\n</html>\n"
    )


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover - the loop returns


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in counts.items() if n)


def _image(image_id: str, names: dict[str, str]) -> str:
    """An image by its name with the id on hover, or by its id when the name is unknown."""
    name = names.get(image_id)
    if name is None:
        return f'<code class="image">{_e(image_id)}</code>'
    return f'<span class="image" title="{_e(image_id)}">{_e(name)}</span>'


def _aggregate(job: dict[str, Any], names: dict[str, str]) -> str:
    """The job's aggregate by name with its id beside (uuid on hover); the id alone once the
    aggregate is deleted."""
    name = names.get(job["aggregate_uuid"])
    if name is None:
        return (f'<td title="deleted aggregate {_e(job["aggregate_uuid"])}">'
                f'{_e(job["aggregate_id"])}</td>')
    return (f'<td title="{_e(job["aggregate_uuid"])}"><span class="aggregate">{_e(name)}'
            f'</span> <span class="muted">({_e(job["aggregate_id"])})</span></td>')


def _from_peers(job: dict[str, Any]) -> str:
    """`` (93.8 % from peers, 2 copies from the image service)`` for a job whose hosts
    fetched from peers (peer distribution); empty otherwise."""
    spread = job.get("distribution") or {}
    if not spread.get("peer_copies"):
        return ""
    origin = spread["origin_copies"]
    return (f" ({spread['offload_percent']:.1f} % from peers, {origin} "
            f"{'copy' if origin == 1 else 'copies'} from the image service)")


def _next_start(job: dict[str, Any]) -> str:
    """`` waiting for its window until T`` for a ``scheduled`` job (its terms' not_before or
    daily window: the jobs API's ``next_start_at``); empty otherwise."""
    if job["state"] != "scheduled":
        return ""
    until = job.get("next_start_at")
    text = f"waiting for its window until {until}" if until else "waiting for its window"
    return f' <span class="reason" data-field="next-start">{_e(text)}</span>'


def _jobs_table(view: StatusView) -> str:
    if not view.jobs:
        return '<p class="muted">No pre-cache job yet.</p>'
    rows = []
    for job in view.jobs:
        done, total = job["hosts_reported"], job["total_hosts"]
        images = ", ".join(_image(i, view.image_names) for i in job["image_ids"])
        rows.append(
            f'<tr data-job="{_e(job["id"])}" data-state="{_e(job["state"])}">'
            f'<td><code>{_e(job["id"])}</code></td>{_aggregate(job, view.aggregate_names)}'
            f'<td>{images}</td>'
            f'<td class="{_e(job["state"])}" data-field="state">{_e(job["state"])}</td>'
            f'<td><progress max="{max(total, 1)}" value="{done}"></progress> '
            f'<span data-field="progress-text">{done}/{total} hosts</span>'
            f'{_next_start(job)}</td>'
            f'<td data-field="counts">{_e(_counts(job["counts"]))}</td>'
            f'<td class="num">{_e(human_bytes(job["bytes_downloaded"]))}'
            f'{_e(_from_peers(job))}</td>'
            f'<td>{_e(job["created_at"])}</td><td>{_e(job["error"])}</td></tr>'
        )
    return ("<table id=\"jobs\"><thead><tr><th>Job</th><th>Aggregate</th><th>Images</th>"
            "<th>State</th>"
            "<th>Progress</th><th>Results</th><th>Downloaded</th><th>Created</th>"
            "<th>Error</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def latest_results(jobs: list[dict[str, Any]]) -> tuple[list[str], list[str],
                                                         dict[tuple[str, str], dict[str, Any]]]:
    """Hosts, images and, per (host, image), the result of the newest job that has one.

    ``jobs`` is newest first; each result gets its job's id as ``job``.
    """
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    images: dict[str, None] = {}
    for job in jobs:
        for image_id in job["image_ids"]:
            images.setdefault(image_id, None)
        for host in job.get("hosts") or []:
            for result in host["images"]:
                cells.setdefault((host["host"], result["image_id"]), {**result, "job": job["id"]})
    hosts = sorted({host for host, _image in cells})
    return hosts, list(images), cells


def _cell(result: dict[str, Any] | None) -> str:
    if result is None:
        return '<td class="muted">-</td>'
    state = result["state"]
    reason = f'<span class="reason">{_e(result["reason"])}</span>' if result["reason"] else ""
    return (f'<td class="{_e(state)}" title="job {_e(result["job"])}">'
            f'{_e(state)}{reason}</td>')


def _matrix(view: StatusView) -> str:
    hosts, images, cells = latest_results(view.jobs)
    if not hosts:
        return '<p class="muted">No host has reported a result yet.</p>'
    head = "".join(f"<th>{_image(i, view.image_names)}</th>" for i in images)
    rows = "".join(
        f"<tr><th>{_e(host)}</th>" + "".join(_cell(cells.get((host, i))) for i in images)
        + "</tr>"
        for host in hosts
    )
    return (f'<table id="matrix"><thead><tr><th>Host</th>{head}</tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def _caches_table(caches: list[dict[str, Any]]) -> str:
    if not caches:
        return '<p class="muted">No compute has reported its image cache yet.</p>'
    pins = any("pinned" in c for c in caches)
    rows = "".join(
        f'<tr><th>{_e(c["host"])}</th><td class="num">{_e(c["image_count"])}</td>'
        f'<td class="num">{_e(human_bytes(c["usage_bytes"]))}</td>'
        + (f'<td class="num">{_e(c.get("pinned", 0))}</td>' if pins else "")
        + f'<td>{_e(c["reported_at"])}</td></tr>'
        for c in caches
    )
    head = "<th>Pinned</th>" if pins else ""
    return ('<table id="caches"><thead><tr><th>Host</th><th>Images</th><th>Disk used</th>'
            f"{head}<th>Reported</th></tr></thead><tbody>{rows}</tbody></table>")


def render_page(view: StatusView) -> str:
    """The status page."""
    forget = ('<p><a href="#" id="forget-token">Forget the token</a></p>'
              if view.token_cookie else "")
    body = (
        "<h1>fleetcache status</h1>\n"
        f'<p class="muted">Live progress: <span id="poll-status">waiting</span></p>{forget}\n'
        f"<h2>Pre-cache jobs</h2>\n{_jobs_table(view)}\n"
        "<h2>Hosts &times; images</h2>\n<p class=\"muted\">The result of the newest job "
        f"that asked each host for each image.</p>\n{_matrix(view)}\n"
        f"<h2>Image cache per host</h2>\n{_caches_table(view.caches)}"
    )
    return _document("fleetcache status", body, {
        "data-progress-url": view.progress_url, "data-poll-ms": str(POLL_MS),
        "data-token-cookie": TOKEN_COOKIE, "data-cookie-path": view.cookie_path,
    })


def render_sign_in(cookie_path: str, message: str) -> str:
    """The page a browser without a valid token gets: a field to paste one into."""
    body = (
        "<h1>fleetcache status</h1>\n"
        f"<p>{_e(message)}</p>\n"
        '<form id="token-form"><label for="token">Keystone token (<code>openstack token '
        'issue -f value -c id</code>)</label><br>\n'
        '<input id="token" type="password" autocomplete="off" size="60"> '
        '<button type="submit">Show status</button></form>'
    )
    return _document("fleetcache status: sign in", body, {
        "data-token-cookie": TOKEN_COOKIE, "data-cookie-path": cookie_path,
    })
