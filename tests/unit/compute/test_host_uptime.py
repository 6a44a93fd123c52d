"""The host's uptime text (fleetcache.compute.host_uptime): procps' ``uptime`` format."""

from __future__ import annotations

import pathlib
import re
import time

import pytest

from fleetcache.compute import host_uptime

AT = time.struct_time((2026, 11, 27, 9, 5, 7, 4, 331, 0))
LOAD = (1.256, 0.6, 0.25)


@pytest.mark.parametrize(("seconds", "text"), [
    (59.9, " 09:05:07 up 0 min,  load average: 1.26, 0.60, 0.25"),
    (3 * 60 + 1, " 09:05:07 up 3 min,  load average: 1.26, 0.60, 0.25"),
    (2 * 3600 + 3 * 60, " 09:05:07 up  2:03,  load average: 1.26, 0.60, 0.25"),
    (86400 + 5 * 60, " 09:05:07 up 1 day, 5 min,  load average: 1.26, 0.60, 0.25"),
    (3 * 86400 + 14 * 3600 + 59 * 60,
     " 09:05:07 up 3 days, 14:59,  load average: 1.26, 0.60, 0.25"),
])
def test_format_is_uptimes(seconds: float, text: str) -> None:
    assert host_uptime.format_uptime(AT, seconds, LOAD) == text


def test_reads_this_hosts_uptime(tmp_path: pathlib.Path) -> None:
    proc = tmp_path / "uptime"
    proc.write_text("7260.51 1000.00\n")
    assert re.fullmatch(r" \d\d:\d\d:\d\d up  2:01,  load average: [\d.]+, [\d.]+, [\d.]+",
                        host_uptime.host_uptime(proc))


@pytest.mark.parametrize("content", [None, "", "x y"])
def test_a_host_without_proc_uptime_cannot_tell(tmp_path: pathlib.Path,
                                                content: str | None) -> None:
    proc = tmp_path / "uptime"
    if content is not None:
        proc.write_text(content)
    with pytest.raises(NotImplementedError, match="uptime"):
        host_uptime.host_uptime(proc)
