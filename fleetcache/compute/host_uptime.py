"""This host's uptime as ``uptime(1)`` prints it, for ``GET /os-hypervisors/{id}/uptime``.

Nova's libvirt driver answers that route with the output of ``env LANG=C uptime`` on the
compute (nova/virt/libvirt/host.py ``get_uptime`` in older releases; the route's text is
driver-defined). fleetcache reads the same figures from the kernel, ``/proc/uptime`` and the
load averages (``os.getloadavg``), and formats them as procps' ``uptime`` does::

     14:38:12 up 3 days,  2:03,  load average: 1.26, 0.61, 0.25

without the count of logged-in users (utmp, which this host may not keep).
"""

from __future__ import annotations

import os
import pathlib
import time

PROC_UPTIME = pathlib.Path("/proc/uptime")


def format_uptime(now: time.struct_time, seconds_up: float,
                  load: tuple[float, float, float]) -> str:
    """The text of ``uptime(1)`` (procps ``sprint_uptime``) for these figures.

    :param now: the local time to show.
    :param seconds_up: seconds since the host booted.
    :param load: the 1, 5 and 15 minute load averages.
    """
    minutes = int(seconds_up) // 60
    days, hours, minutes = minutes // (24 * 60), (minutes // 60) % 24, minutes % 60
    text = f" {now.tm_hour:02d}:{now.tm_min:02d}:{now.tm_sec:02d} up "
    if days:
        text += f"{days} day{'' if days == 1 else 's'}, "
    text += f"{hours:2d}:{minutes:02d}, " if hours else f"{minutes} min, "
    return text + " load average: {:.2f}, {:.2f}, {:.2f}".format(*load)


def host_uptime(proc_uptime: pathlib.Path = PROC_UPTIME) -> str:
    """This host's uptime, now.

    :raises NotImplementedError: on a host without ``/proc/uptime`` (not Linux).
    """
    try:
        seconds_up = float(proc_uptime.read_text().split()[0])
    except (OSError, IndexError, ValueError) as exc:
        raise NotImplementedError(f"this host has no readable {proc_uptime}: {exc}") from exc
    return format_uptime(time.localtime(), seconds_up, os.getloadavg())
