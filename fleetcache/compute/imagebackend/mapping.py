"""``[libvirt] images_type_mapping``: its parser and the rules it enforces (seed 001).

An entry is ``<source image format>:<backend>``. The parser enforces the spec's rules: each
source format maps to one backend (else the conversion rule is ambiguous), ``lvm`` and ``rbd``
(and the other backend-only names) are never a source, and every name must be known: a
source is one of :data:`~fleetcache.common.disk_formats.DISK_FORMATS`, a backend one of
:data:`~fleetcache.common.disk_formats.DISK_BACKENDS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from fleetcache.common import exception
from fleetcache.common.disk_formats import DISK_BACKENDS, DISK_FORMATS, IMAGES_TYPE_CHOICES

OPTION = "[libvirt] images_type_mapping"

#: Names that are backends (or ``default``) only and so can never be a source format.
BACKEND_ONLY = tuple(name for name in IMAGES_TYPE_CHOICES if name not in DISK_FORMATS)

RULE_MALFORMED = "malformed entry"
RULE_AMBIGUOUS = "ambiguous source"
RULE_BACKEND_AS_SOURCE = "lvm/rbd as a source"
RULE_UNKNOWN_SOURCE = "unknown source format"
RULE_UNKNOWN_BACKEND = "unknown backend"


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken rule: ``rule`` is one of the ``RULE_*`` names, ``message`` says where."""

    rule: str
    message: str

    def __str__(self) -> str:
        return f"{OPTION}: {self.message} (rule: {self.rule})"


def _check_entry(entry: str) -> tuple[str, str] | Violation:
    parts = entry.split(":")
    if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
        return Violation(
            RULE_MALFORMED, f"entry {entry!r} is not of the form <source format>:<backend>"
        )
    source, backend = parts[0].strip().lower(), parts[1].strip().lower()
    if source in BACKEND_ONLY:
        return Violation(
            RULE_BACKEND_AS_SOURCE,
            f"entry {entry!r}: {source} is a disk backend, not an image format; "
            f"{', '.join(BACKEND_ONLY)} cannot be specified as a source",
        )
    if source not in DISK_FORMATS:
        return Violation(
            RULE_UNKNOWN_SOURCE,
            f"entry {entry!r}: unknown source format {source!r} "
            f"(known: {', '.join(DISK_FORMATS)})",
        )
    if backend not in DISK_BACKENDS:
        return Violation(
            RULE_UNKNOWN_BACKEND,
            f"entry {entry!r}: unknown backend {backend!r} (known: {', '.join(DISK_BACKENDS)})",
        )
    return source, backend


def mapping_violations(values: Iterable[str]) -> tuple[dict[str, str], list[Violation]]:
    """Parse what it can and list every broken rule (used by the config check)."""
    mapping: dict[str, str] = {}
    first_entry: dict[str, str] = {}
    violations: list[Violation] = []
    for raw_entry in values:
        entry = raw_entry.strip()
        if not entry:
            continue
        checked = _check_entry(entry)
        if isinstance(checked, Violation):
            violations.append(checked)
            continue
        source, backend = checked
        if source in mapping and mapping[source] != backend:
            violations.append(
                Violation(
                    RULE_AMBIGUOUS,
                    f"ambiguous conversion rule for source format {source}: "
                    f"{first_entry[source]!r} and {entry!r} "
                    "(each source format may map to one backend only)",
                )
            )
            continue
        mapping[source] = backend
        first_entry.setdefault(source, entry)
    return mapping, violations


def parse_images_type_mapping(values: Iterable[str]) -> dict[str, str]:
    """``["raw:lvm", "ploop:ploop"]`` -> ``{"raw": "lvm", "ploop": "ploop"}``.

    :raises InvalidConfiguration: naming ``[libvirt] images_type_mapping``, every offending
        entry and the rule it breaks.
    """
    mapping, violations = mapping_violations(values)
    if violations:
        raise exception.InvalidConfiguration(reason="; ".join(str(v) for v in violations))
    return mapping
