"""CPU accounting of a fan-out run: who spent how much CPU per host, in the job and the baseline.

Every group is a function returning CPU seconds so far (``/proc/<pid>/stat`` utime + stime):
the conductor, the API (gunicorn master and workers), the fake computes (all shards), the
broker node (beam), and this process (the baseline client, or the job's poller).
"""

from __future__ import annotations

import resource
from collections.abc import Callable

from _benchlib import median


def self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """Snapshots of several processes' CPU, and per-host medians of their differences."""

    def __init__(self) -> None:
        self.groups: dict[str, Callable[[], float]] = {}
        self.samples: dict[str, list[dict[str, float]]] = {}

    def add(self, name: str, func: Callable[[], float]) -> None:
        self.groups[name] = func

    def snapshot(self) -> dict[str, float]:
        return {name: func() for name, func in self.groups.items()}

    def record(self, phase: str, before: dict[str, float]) -> dict[str, float]:
        """Store and return the CPU each group spent since ``before``."""
        after = self.snapshot()
        spent = {k: after[k] - before[k] for k in before if k in after}
        self.samples.setdefault(phase, []).append(spent)
        return spent

    def per_host_ms(self, phase: str, hosts: int) -> dict[str, float]:
        rows = self.samples.get(phase, [])
        names = list(rows[0]) if rows else []
        return {n: median([r[n] for r in rows]) / hosts * 1000 for n in names}

    def table(self, hosts: int, phases: tuple[str, ...] = ("baseline", "job")) -> str:
        """CPU ms per host of each group, median over the rounds, one column per phase."""
        columns = {p: self.per_host_ms(p, hosts) for p in phases if p in self.samples}
        names = list(self.groups)
        lines = [f"{'CPU ms per host':>16}  " + " ".join(f"{p:>10}" for p in columns)]
        for name in names + ["total"]:
            cells = []
            for col in columns.values():
                value = sum(col.values()) if name == "total" else col.get(name, float("nan"))
                cells.append(f"{value:10.2f}")
            lines.append(f"{name:>16}: " + " ".join(cells))
        return "\n".join(lines)
