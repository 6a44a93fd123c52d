"""The one ``GET /allocation_candidates`` query of a scheduling request, as the request filters
build it up (:mod:`fleetcache.conductor.scheduler.request_filters`).

Placement ANDs repeated ``member_of`` parameters, so each ``in:`` group here is one condition
("in at least one of these aggregates") and all must hold; the aggregates a request must stay
out of go into a single ``member_of=!in:...`` (microversion 1.32).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class CandidateQuery:
    """What to ask Placement for; :meth:`params` is the query string."""

    resources: dict[str, int] = dataclasses.field(default_factory=dict)
    required: set[str] = dataclasses.field(default_factory=set)
    forbidden: set[str] = dataclasses.field(default_factory=set)
    #: Each set: the host must be in at least one of its aggregates.
    member_of: list[frozenset[str]] = dataclasses.field(default_factory=list)
    #: The host must be in none of these aggregates.
    not_member_of: set[str] = dataclasses.field(default_factory=set)
    in_tree: str | None = None
    limit: int | None = None
    #: Set by a request filter that knows no host can match (an availability zone no aggregate
    #: has): no Placement call is made and the request fails with this reason.
    impossible: str | None = None

    def require_member_of(self, aggregates: set[str] | frozenset[str]) -> None:
        """The host must be in at least one of ``aggregates`` (an empty set: no host can)."""
        if not aggregates:
            self.impossible = self.impossible or "no aggregate satisfies the request"
            return
        self.member_of.append(frozenset(aggregates))

    def params(self) -> list[tuple[str, str]]:
        """The query string as ``(name, value)`` pairs (``member_of`` may repeat)."""
        params: list[tuple[str, str]] = []
        if self.resources:
            params.append(("resources", ",".join(
                f"{rc}:{amount}" for rc, amount in sorted(self.resources.items()))))
        traits = sorted(self.required) + [f"!{t}" for t in sorted(self.forbidden)]
        if traits:
            params.append(("required", ",".join(traits)))
        for group in self.member_of:
            params.append(("member_of", "in:" + ",".join(sorted(group))))
        if self.not_member_of:
            params.append(("member_of", "!in:" + ",".join(sorted(self.not_member_of))))
        if self.in_tree:
            params.append(("in_tree", self.in_tree))
        if self.limit:
            params.append(("limit", str(self.limit)))
        return params

    def without_pushdown(self) -> CandidateQuery:
        """The same resources and limit without traits, aggregates or tree: the query a
        scheduler that filters everything in Python would send (the benchmark's Nova-style
        pass)."""
        return CandidateQuery(resources=dict(self.resources), limit=self.limit)
