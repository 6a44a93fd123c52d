"""Peer distribution: which source each host of a job fetches an image from (``[image_cache]
peer_distribution``).

The conductor is the tracker that Meta's Owl, Dragonfly's scheduler and Uber's Kraken tracker
each had to build: it already knows every host's cell, peer group (:class:`PeerSite`), cache
report and outcome. For each image, hosts of one peer group take their bytes from the image
service only while no host of the group holds the image, at most ``origin_downloads_per_group``
at once; every other host waits for a holder with a free upload slot (at most
``peer_max_uploads`` receivers per source) and is given up to ``peer_candidates`` holders, the
image service implied last. A host that finishes becomes a holder once it agreed to serve
(``serve_images``: it holds the image's own bytes, pinned while peers may ask), so the holders
of a group grow about ``peer_max_uploads + 1`` fold per round: about log N rounds, about one
copy per group from the image service.

With ``peer_cut_through`` (the default), a host becomes a source as soon as its own download
is assigned, before its ``cache_images`` call (``serve_images`` on a compute doing
cut-through accepts an image it is about to download, and its image server streams the
download as it is written): the hosts of a group then form chains and trees fed from the one
download from the image service, and the time to all hosts stays nearly flat in N. Such a
*partial* holder is offered after the complete ones of equal load; once its download ends it
is a holder like any other if it holds the image (``serve_images`` again, which pins it),
else it is no source any more. A compute that refuses (an older one, or one without
cut-through) becomes a source once it finished, as without cut-through.

A host whose cache report already holds the image (a host an earlier run of the job cached)
is asked without a source; from the start of its call (:meth:`PeerPlanner.expect`) the hosts
of its group that lack the image wait for it as for a host about to be offered, rather than
take the group's image service slot for a second copy, and once its call ended it is a holder
like any other, or, if its report was wrong, the waiters are woken to go on without it. The
job calls such hosts first (:mod:`~.job`), so that they are under way before the hosts that
wait for them.

A host waits for a peer at most ``peer_wait_timeout`` seconds, then fetches from the image
service. A source whose bytes failed a receiver's verification is quarantined for
``peer_quarantine_time`` (:class:`PeerQuarantine`, shared by the conductor's jobs) if it
held a verified copy of its own: with cut-through a host relays bytes before it checked
them, so a host named by its receiver whose own download was refused too only relayed a liar's
bytes and is not quarantined (one named before its own outcome is known is not offered
again until it is: quarantined then if verified). A source that failed a receiver otherwise
(dead, stalled, refused) is not used again by the job, and holds none of its group's image
service slots from then on, nor the upload slot of its own source (a dead compute's call may
take minutes to end, and the receivers it failed need those slots now). One that only
answered that it does not hold the image (a 404 that says so: its base converted or aged
out, a download that ended or never started; the receiver's ``absent_peers``) failed no
transfer: it is not offered for that image until it holds it again, and stays a source of
the others.

A host whose peers all failed comes back for its next source (compute RPC 1.7, its bytes
kept): it stays a partial holder, its receivers counted (they wait for it: its image server
asks them to), and is never given a download that streams from its own; so, with the peers
that failed it set aside, it usually gets the image service under the group's slot, and its
receivers keep their place in the chain.

Each job run has its own key (:func:`~fleetcache.common.peer_tokens.new_key`), and each
source a key derived from it (:func:`~fleetcache.common.peer_tokens.source_key`), given to it
with ``serve_images``; each receiver's credential, signed with its source's key, names the
job, the image, both hosts and the receiver's address, and ends with the source's grant.

Limits: upload slots are counted per job run in this conductor; two jobs (or conductors)
using one source at once are bounded by the source itself, which answers 503 beyond
``peer_max_uploads`` (the receiver then takes its next source). The image service slots of a
group (``origin_downloads_per_group``) are counted per job run too: two jobs running at once
for the same image may each take one on the same group. A failed source's upload slot is
given back before its own call ends: should it be alive after all (stalled, say), its source
may briefly have one receiver more than planned, and answers 503 beyond its own
``peer_max_uploads``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from oslo_config import cfg

from fleetcache.common import peer_tokens
from fleetcache.common.context import RequestContext
from fleetcache.common.db.compute_states import PeerSite
from fleetcache.compute.rpcapi import ImageResult, Peer
from fleetcache.conductor.precache.origin import GateClosed

LOG = logging.getLogger(__name__)

#: Result states after which a host holds the image.
_HOLDING = frozenset({"cached", "existing"})


class ServeClient(Protocol):
    """What the planner needs of a compute RPC client (``compute.rpcapi.ComputeAPI``)."""

    def serve_images(self, ctxt: RequestContext, host: str, job_uuid: str, key: str,
                     image_ids: list[str], until: float) -> list[str]: ...


@dataclasses.dataclass(frozen=True)
class Assignment:
    """Where one host takes one image from.

    :ivar peers: the peers to try in order (the image service after them); empty: the image
        service only.
    :ivar source: the first peer's host, whose upload slot this assignment holds.
    :ivar origin_slot: whether it holds one of its group's image service slots.
    :ivar reason: why the image service although peers are on (shown with the result).
    :ivar seen: each peer's :attr:`_Holder.since` when assigned: one that answers 404 but
        has been offered again or has finished its download since holds newer bytes than
        that answer, however late the receiver's result comes.
    """

    peers: list[Peer] = dataclasses.field(default_factory=list)
    source: str | None = None
    origin_slot: bool = False
    reason: str | None = None
    seen: tuple[tuple[str, int], ...] = ()

    @property
    def from_origin(self) -> bool:
        return not self.peers


class PeerQuarantine:
    """Hosts not used as sources, after their bytes failed a receiver's verification, for
    ``seconds``; one per conductor, shared by its jobs."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = float(seconds)
        self._clock = clock
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, host: str) -> None:
        with self._lock:
            self._until[host] = self._clock() + self.seconds

    def __contains__(self, host: object) -> bool:
        with self._lock:
            until = self._until.get(str(host))
            if until is None:
                return False
            if until <= self._clock():
                del self._until[str(host)]
                return False
            return True


@dataclasses.dataclass
class _Holder:
    host: str
    site: PeerSite
    #: Its cell's compute RPC client (to renew its grant).
    client: ServeClient
    #: Epoch seconds its grant (and the credentials naming it) ends.
    until: float
    uploads: int = 0
    #: Whether its own download is still under way (cut-through).
    partial: bool = False
    #: The peer that download streams from (None: the image service).
    fed_by: str | None = None
    #: This holding's number in the planner: a host dropped as a source and offered again is
    #: another holding, whose upload slots are counted afresh (``_ImageGroup.fed``).
    holding: int = 0
    #: The planner's count at its latest offer or the end of its download (a 404 it
    #: answered before that is out of date: ``Assignment.seen``).
    since: int = 0


@dataclasses.dataclass
class _ImageGroup:
    """One image in one peer group."""

    holders: dict[str, _Holder] = dataclasses.field(default_factory=dict)
    #: Hosts fetching it from the image service under one of the group's slots.
    origin: set[str] = dataclasses.field(default_factory=set)
    #: Hosts about to be offered as sources: those given the image service whose offer
    #: waits for their download lease (``assign(offer_origin=False)``, cut-through), and
    #: those whose cache report holds the image, while their call is under way
    #: (:meth:`PeerPlanner.expect`). The group's next hosts wait for them as for a holder,
    #: and, when one is a holder already (back after its peers failed), it is given to no
    #: new receiver meanwhile.
    offering: set[str] = dataclasses.field(default_factory=set)
    #: Each receiver's upload slot: the source and the holding it is counted on; given back
    #: once, by whichever comes first of the receiver's call ending and the receiver failing
    #: one of its own receivers.
    fed: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)
    #: Holders that answered a receiver that they do not hold it (404: converted, aged out,
    #: a download that never started): not offered for it until offered again or their own
    #: call for it ends with it held. Kept among the holders, so that the chains through
    #: them are still walked.
    absent: set[str] = dataclasses.field(default_factory=set)


class PeerPlanner:
    """The sources of one job run's hosts; thread-safe (the job's host-call workers share it).

    :param quarantine: the conductor's quarantined sources.
    :param clock: epoch seconds (grants and credentials end at such times).
    :param monotonic: for waits.
    """

    def __init__(self, conf: cfg.ConfigOpts, ctxt: RequestContext, job_uuid: str,
                 quarantine: PeerQuarantine,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        opts = conf.image_cache
        self.ctxt = ctxt
        self.job_uuid = job_uuid
        self.max_uploads: int = opts.peer_max_uploads
        self.origin_per_group: int = opts.origin_downloads_per_group
        self.candidates: int = opts.peer_candidates
        self.wait_timeout: float = float(opts.peer_wait_timeout)
        self.cut_through: bool = opts.peer_cut_through
        #: A grant lasts twice the longest call a receiver may make; renewed past half of it.
        self.grant_seconds = 2.0 * float(conf.long_rpc_timeout)
        self.key = peer_tokens.new_key()
        self.quarantine = quarantine
        self._clock = clock
        self._monotonic = monotonic
        self._groups: dict[tuple[str, str], _ImageGroup] = {}
        #: Sources that failed a receiver of this job in transport: not used again.
        self._failed: set[str] = set()
        #: Hosts whose own download held peer bytes a check refused (relays, cut-through),
        #: and those whose download ended with a verified copy.
        self._relays: set[str] = set()
        self._verified: set[str] = set()
        #: Not offered until their own outcome is known: hosts a receiver named for refused
        #: bytes (quarantined if their copy then verifies: the liar), and hosts whose
        #: download streams from a refused one (cleared by their outcome, whatever it is).
        self._named: set[str] = set()
        self._tainted: set[str] = set()
        self._holdings = 0
        self._stamps = 0  # _Holder.since
        self._cond = threading.Condition()

    def assign(self, host: str, site: PeerSite, image_id: str,
               on_wait: Callable[[str], None] | None = None,
               stopping: threading.Event | None = None,
               client: ServeClient | None = None,
               offer_origin: bool = True) -> Assignment:
        """Where ``host`` (of ``site``) takes ``image_id`` from; waits for a peer while its
        group's image service slots are taken and no holder has a free upload slot, at most
        ``peer_wait_timeout`` seconds. With cut-through and ``client`` (the host's cell's
        compute RPC client), the host is then offered as a source of its download under
        way, if it agrees (``serve_images``).

        :param on_wait: called once, with what it waits for, when the host has to wait.
        :param offer_origin: whether a host assigned the image service is offered at once;
            False: by :meth:`offer`, once the caller has its download lease. A host that
            waits for one must not be offered before: its image server answers 404 to an
            announced download that did not start within ``peer_stall_timeout``, and its
            receivers would give a healthy source up as dead.
        :raises GateClosed: when ``stopping`` was set while it waited.
        """
        assignment = self._assign(host, site, image_id, on_wait, stopping)
        if client is None or not self.cut_through:
            return assignment
        if offer_origin or not assignment.from_origin:
            self.offer(host, site, image_id, client, assignment)
        else:
            with self._cond:
                self._groups[(site["group"], image_id)].offering.add(host)
        return assignment

    def offer(self, host: str, site: PeerSite, image_id: str, client: ServeClient,
              assignment: Assignment) -> None:
        """With cut-through, offer ``host`` as a source of its download of ``image_id`` (as
        ``assignment`` says), which is about to start; hosts waiting for a peer of its group
        are woken."""
        if not self.cut_through:
            return
        try:
            self._offer_partial(host, site, image_id, client, assignment.source)
        finally:
            self._offered(site, image_id, host)

    def expect(self, host: str, site: PeerSite, image_id: str) -> None:
        """``host``, whose cache report holds ``image_id``, starts its call: until it ended
        (:meth:`finished`), the hosts of its group that lack the image wait for it (at most
        ``peer_wait_timeout``) as for a host about to be offered, instead of fetching a
        second copy from the image service.

        Called once its call starts, never before: a host waiting for a call that has not
        been dispatched would wait out ``peer_wait_timeout``."""
        with self._cond:
            self._groups.setdefault((site["group"], image_id), _ImageGroup()).offering.add(host)

    def _offered(self, site: PeerSite, image_id: str, host: str) -> None:
        """``host`` is no longer about to be offered (offered, refused, or its call ended)."""
        with self._cond:
            state = self._groups.get((site["group"], image_id))
            if state is not None and host in state.offering:
                state.offering.discard(host)
                self._cond.notify_all()

    def _assign(self, host: str, site: PeerSite, image_id: str,
                on_wait: Callable[[str], None] | None,
                stopping: threading.Event | None) -> Assignment:
        deadline = self._monotonic() + self.wait_timeout
        told = False
        with self._cond:
            while True:
                state = self._groups.setdefault((site["group"], image_id), _ImageGroup())
                holder = self._free_holder(state, host)
                if holder is not None:
                    break
                if (not self._usable(state, host)
                        and not (state.offering - {host} - self._failed)
                        and self._origin_in_use(state) < self.origin_per_group):
                    state.origin.add(host)
                    return Assignment(origin_slot=True)
                left = deadline - self._monotonic()
                if left <= 0:
                    return Assignment(reason=f"no_peer_in_time: no peer of {site['group']} "
                                             f"within {self.wait_timeout:.0f} s")
                if not told and on_wait is not None:
                    told = True
                    self._cond.release()  # it writes to the database: not under the lock
                    try:
                        on_wait(f"for a peer of {site['group']}")
                    finally:
                        self._cond.acquire()
                    continue  # a holder may have come meanwhile
                self._cond.wait(min(left, 1.0))
                if stopping is not None and stopping.is_set():
                    raise GateClosed(f"the conductor stopped while {host} waited for a peer")
            chosen = [holder, *[h for h in self._by_load(state, host) if h is not holder]]
            chosen = chosen[:self.candidates]
            holder.uploads += 1
            state.fed[host] = (holder.host, holder.holding)
            seen = tuple((h.host, h.since) for h in chosen)
        self._renew_grants(image_id, chosen)
        return Assignment(peers=[self._peer(host, site, image_id, h) for h in chosen],
                          source=holder.host, seen=seen)

    def finished(self, host: str, site: PeerSite, image_id: str, assignment: Assignment,
                 result: ImageResult | None, client: ServeClient) -> None:
        """Give back what ``assignment`` held, learn from ``result`` (``None``: the call
        failed), and make ``host`` a holder if it now holds the image and agrees to serve it.

        :param client: the host's cell's compute RPC client (``serve_images``).

        The host is offered as a source before its slots are given back, so that a host
        waiting for a peer never sees the group's image service slot free while the new
        holder is not known yet (it would fetch a second copy from the image service).
        """
        holder = None
        if result is not None and result["state"] in _HOLDING:
            until = self._clock() + self.grant_seconds
            if self._serve(client, host, image_id, until):
                holder = _Holder(host, site, client, until)
        with self._cond:
            state = self._groups.setdefault((site["group"], image_id), _ImageGroup())
            self._release_upload(state, host)
            if assignment.origin_slot:
                state.origin.discard(host)
            state.offering.discard(host)  # a wait for its lease that ended without it
            if result is not None:
                self._drop_relays_of(state, self._learn(host, assignment, result))
                self._mark_absent(state, host, image_id, assignment, result)
            partial = state.holders.get(host)
            coming_back = result is not None and "failed_peers" in result
            if holder is not None:
                state.absent.discard(host)
            if holder is not None and partial is not None:  # its receivers stay counted
                partial.partial, partial.until = False, holder.until
                self._stamp(partial)
            elif holder is not None:
                state.holders[host] = self._numbered(holder)
            elif partial is not None and not coming_back:
                del state.holders[host]  # its download failed, or its base is not served
            self._cond.notify_all()

    # -- helpers ----------------------------------------------------------------------------

    def _learn(self, host: str, assignment: Assignment, result: ImageResult) -> list[str]:
        """Quarantine the peers whose bytes failed verification and held a verified copy;
        drop a first source that did not deliver, unless it only answered that it does not
        hold the image (:meth:`_mark_absent`; we hold the lock).

        :returns: the hosts whose downloads under way, and those streaming from them, are
            no sources any more (their bytes were refused, or their source lied).
        """
        named = [str(bad) for bad in result.get("bad_peers") or []]
        self._tainted.discard(host)  # its own outcome is known
        refused_here = bool(named)
        if refused_here:
            self._relays.add(host)
            self._named.discard(host)  # it only relayed what it was sent
        elif result["state"] in _HOLDING:
            self._verified.add(host)
            if host in self._named:
                self._named.discard(host)
                self._quarantine(host)
        roots = [host] if refused_here else []
        for bad in named:
            if bad in self._relays:  # its refusal, and its relays, were handled then
                LOG.info("Job %s: peer %s relayed bytes refused by its own check too: not "
                         "quarantined", self.job_uuid, bad)
                continue
            if bad in self._verified:
                self._quarantine(bad)
            else:
                self._named.add(bad)
            roots.append(bad)
        if (assignment.source is not None and result["state"] == "cached"
                and result.get("source_host") != assignment.source
                and assignment.source not in (result.get("absent_peers") or [])):
            LOG.info("Job %s: peer %s did not deliver (%s); not used again by the job",
                     self.job_uuid, assignment.source, result.get("fallback_reason"))
            self._fail(assignment.source)
        for failed in result.get("failed_peers") or []:  # the host gave the image back
            LOG.info("Job %s: peer %s failed %s (%s); not used again by the job",
                     self.job_uuid, failed, host, result.get("fallback_reason"))
            self._fail(str(failed))
        return roots

    def _mark_absent(self, state: _ImageGroup, host: str, image_id: str,
                     assignment: Assignment, result: ImageResult) -> None:
        """Stop offering, for this image only, the peers ``host`` was given that answered
        it they do not hold the image (a base converted or aged out, a download that ended
        or never started): they failed no transfer, so they stay sources of the job's other
        images (we hold the lock). A peer offered again, or whose download ended, since it
        was assigned holds newer bytes than its 404 (:attr:`Assignment.seen`)."""
        seen = dict(assignment.seen)
        for name in result.get("absent_peers") or []:
            holder = state.holders.get(name) if name != host else None
            if holder is None or seen.get(name) != holder.since:
                continue
            state.absent.add(name)
            LOG.info("Job %s: peer %s does not hold image %s; not offered for it until it "
                     "does", self.job_uuid, name, image_id)

    def _fail(self, host: str) -> None:
        """``host`` failed a receiver: it is not used again by the job, and gives back at
        once the upload slots its own downloads hold (we hold the lock), so that the
        receivers it failed may take its source rather than wait for its call to end (a
        dead compute's takes minutes); its image service slots no longer count either
        (:meth:`_origin_in_use`)."""
        self._failed.add(host)
        for state in self._groups.values():
            self._release_upload(state, host)

    def _release_upload(self, state: _ImageGroup, host: str) -> None:
        """Give back the upload slot ``host``'s download holds on its source, if it still
        holds one (we hold the lock): once, whether its call ended or it failed first."""
        fed = state.fed.pop(host, None)
        if fed is None:
            return
        source = state.holders.get(fed[0])
        if source is not None and source.holding == fed[1]:
            source.uploads -= 1

    def _quarantine(self, host: str) -> None:
        LOG.warning("Job %s: peer %s sent bytes that failed verification: not a source for "
                    "%.0f s", self.job_uuid, host, self.quarantine.seconds)
        self.quarantine.add(host)

    def _usable(self, state: _ImageGroup, host: str) -> list[_Holder]:
        return [h for h in state.holders.values()
                if h.host != host and h.host not in state.offering
                and h.host not in state.absent
                and h.host not in self._failed and h.host not in self._named
                and h.host not in self._tainted and h.host not in self.quarantine
                and not self._streams_from(state, h, host)]

    def _streams_from(self, state: _ImageGroup, holder: _Holder, host: str) -> bool:
        """Whether ``holder``'s download under way streams, through any number of hops,
        from ``host``'s: a host back for a second source (its first ones failed) must not
        be given its own receivers, which wait for its bytes."""
        seen = {holder.host}
        while holder.partial and holder.fed_by is not None:
            if holder.fed_by == host:
                return True
            feeder = state.holders.get(holder.fed_by)
            if feeder is None or feeder.host in seen:
                return False
            seen.add(feeder.host)
            holder = feeder
        return False

    def _origin_in_use(self, state: _ImageGroup) -> int:
        """The group's image service slots taken: a host that failed a receiver (dead,
        stalled) holds none, so that the host it failed may take the slot at once rather
        than wait for the failed host's call to end (a dead compute's takes minutes)."""
        return len(state.origin - self._failed)

    def _by_load(self, state: _ImageGroup, host: str) -> list[_Holder]:
        return sorted(self._usable(state, host), key=lambda h: (h.uploads, h.partial, h.host))

    def _offer_partial(self, host: str, site: PeerSite, image_id: str,
                       client: ServeClient, fed_by: str | None) -> None:
        """Make ``host``, whose download of ``image_id`` from ``fed_by`` (None: the image
        service) is about to start, a source of it if it agrees (cut-through; a compute
        that does not refuses an image it lacks)."""
        until = self._clock() + self.grant_seconds
        if not self._serve(client, host, image_id, until):
            return
        with self._cond:
            state = self._groups.setdefault((site["group"], image_id), _ImageGroup())
            current = state.holders.get(host)
            state.absent.discard(host)  # its download starts now
            if current is None:
                state.holders[host] = self._numbered(
                    _Holder(host, site, client, until, partial=True, fed_by=fed_by))
            elif current.partial:  # back for its next source: its receivers stay counted
                current.fed_by, current.until = fed_by, until
                self._stamp(current)
            self._cond.notify_all()

    def _numbered(self, holder: _Holder) -> _Holder:
        """``holder`` with the next holding number (we hold the lock)."""
        self._holdings += 1
        holder.holding = self._holdings
        self._stamp(holder)
        return holder

    def _stamp(self, holder: _Holder) -> None:
        """Mark ``holder`` offered, or its download ended, now (we hold the lock)."""
        self._stamps += 1
        holder.since = self._stamps

    def _drop_relays_of(self, state: _ImageGroup, roots: list[str]) -> None:
        """No longer offer the downloads under way that stream, through any number of
        hops, from ``roots`` (hosts whose bytes were refused): they relay the same bytes
        and will fail the same check. Each is tainted until its own outcome is known."""
        tainted = set(roots)
        while True:
            fed = [h for h in state.holders.values()
                   if h.partial and h.fed_by in tainted and h.host not in tainted]
            if not fed:
                return
            for holder in fed:
                LOG.info("Job %s: %s streams refused bytes (from %s): not offered",
                         self.job_uuid, holder.host, holder.fed_by)
                tainted.add(holder.host)
                self._tainted.add(holder.host)
                del state.holders[holder.host]

    def _free_holder(self, state: _ImageGroup, host: str) -> _Holder | None:
        free = [h for h in self._by_load(state, host) if h.uploads < self.max_uploads]
        return free[0] if free else None

    def _renew_grants(self, image_id: str, holders: list[_Holder]) -> None:
        """Renew the grants of ``holders`` that end within half their life (a long job)."""
        now = self._clock()
        for holder in holders:
            if holder.until - now < self.grant_seconds / 2:
                until = now + self.grant_seconds
                if self._serve(holder.client, holder.host, image_id, until):
                    holder.until = until

    def _serve(self, client: ServeClient, host: str, image_id: str, until: float) -> bool:
        """Have ``host`` serve ``image_id`` to this job until ``until``. :returns: whether
        it does (a failure is logged: the host is then no source)."""
        try:
            served = client.serve_images(self.ctxt, host, self.job_uuid,
                                         peer_tokens.source_key(self.key, host), [image_id],
                                         until)
        except Exception as exc:  # noqa: BLE001 - a host that cannot serve is no source
            LOG.warning("Job %s: %s does not serve image %s to peers: %s: %s", self.job_uuid,
                        host, image_id, type(exc).__name__, exc)
            return False
        return image_id in (served or [])

    def _peer(self, host: str, site: PeerSite, image_id: str, holder: _Holder) -> Peer:
        claims = peer_tokens.PeerClaims(
            job=self.job_uuid, image_id=image_id, requester=host,
            requester_ip=site["address"], server=holder.host, expires=holder.until)
        peer = Peer(host=holder.host, url=holder.site["url"],
                    authorization=peer_tokens.mint(
                        peer_tokens.source_key(self.key, holder.host), claims))
        if holder.site.get("not_cached_header"):
            peer["not_cached_header"] = True
        return peer
