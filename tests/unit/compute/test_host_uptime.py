"""The host's uptime text (fleetcache.compute.host_uptime): procps' ``uptime`` format, which
the ``openstack`` client parses."""

from __future__ import annotations

import re
import time

import psutil
import pytest

from fleetcache.compute import host_uptime

AT = time.struct_time((2026, 11, 27, 9, 5, 7, 4, 331, 0))
LOAD = (1.256, 0.6, 0.25)
#: python-openstackclient's pattern (openstackclient/compute/v2/hypervisor.py ShowHypervisor).
OSC_PATTERN = r"\s*(.+)\sup\s+(.+),\s+(.+)\susers?,\s+load average:\s(.+)"


@pytest.mark.parametrize(("seconds", "users", "text"), [
    (59.9, 0, " 09:05:07 up 0 min,  0 users,  load average: 1.26, 0.60, 0.25"),
    (3 * 60 + 1, 1, " 09:05:07 up 3 min,  1 user,  load average: 1.26, 0.60, 0.25"),
    (2 * 3600 + 3 * 60, 12, " 09:05:07 up  2:03, 12 users,  load average: 1.26, 0.60, 0.25"),
    (86400 + 5 * 60, 2, " 09:05:07 up 1 day, 5 min,  2 users,  load average: 1.26, 0.60, 0.25"),
    (3 * 86400 + 14 * 3600 + 59 * 60, 3,
     " 09:05:07 up 3 days, 14:59,  3 users,  load average: 1.26, 0.60, 0.25"),
])
def test_format_is_uptimes_and_the_openstack_client_reads_it(
        seconds: float, users: int, text: str) -> None:
    formatted = host_uptime.format_uptime(AT, seconds, users, LOAD)
    assert formatted == text
    match = re.match(OSC_PATTERN, formatted)
    assert match is not None and match.group(1).strip() == "09:05:07"
    assert match.group(3).strip() == str(users)
    assert match.group(4) == "1.26, 0.60, 0.25"


def test_reads_this_hosts_figures() -> None:
    text = host_uptime.host_uptime()
    assert re.fullmatch(r" \d\d:\d\d:\d\d up .+, +\d+ users?,  load average: "
                        r"\d+\.\d\d, \d+\.\d\d, \d+\.\d\d", text)


def test_a_host_that_cannot_tell_is_not_implemented(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_boot_time() -> float:
        raise RuntimeError("couldn't find 'btime' line in /proc/stat")

    monkeypatch.setattr(psutil, "boot_time", no_boot_time)
    with pytest.raises(NotImplementedError, match="btime"):
        host_uptime.host_uptime()
