"""This host's uptime as ``uptime(1)`` prints it, for ``GET /os-hypervisors/{id}/uptime``.

Nova's libvirt driver answers that route with the output of ``env LANG=C uptime`` on the
compute (the route's text is driver-defined), and clients parse it: the ``openstack`` client's
``hypervisor show`` splits it into ``host_time``, ``uptime``, ``users`` and ``load_average``
with a pattern that needs every part. fleetcache reads the same figures through psutil (the
boot time, the logged-in users, the load averages) and formats them as procps' ``uptime``
does::

     14:38:12 up 3 days,  2:03,  2 users,  load average: 1.26, 0.61, 0.25
"""

from __future__ import annotations

import time

import psutil


def format_uptime(now: time.struct_time, seconds_up: float, users: int,
                  load: tuple[float, float, float]) -> str:
    """The text of ``uptime(1)`` (procps ``sprint_uptime``) for these figures.

    :param now: the local time to show.
    :param seconds_up: seconds since the host booted.
    :param users: the users logged in.
    :param load: the 1, 5 and 15 minute load averages.
    """
    minutes = max(int(seconds_up), 0) // 60
    days, hours, minutes = minutes // (24 * 60), (minutes // 60) % 24, minutes % 60
    text = f" {now.tm_hour:02d}:{now.tm_min:02d}:{now.tm_sec:02d} up "
    if days:
        text += f"{days} day{'' if days == 1 else 's'}, "
    text += f"{hours:2d}:{minutes:02d}, " if hours else f"{minutes} min, "
    text += f"{users:2d} user{'' if users == 1 else 's'}, "
    return text + " load average: {:.2f}, {:.2f}, {:.2f}".format(*load)


def host_uptime() -> str:
    """This host's uptime, now.

    :raises NotImplementedError: when the host cannot tell (psutil knows no boot time or load
        average on it).
    """
    try:
        seconds_up = time.time() - psutil.boot_time()
        users = len(psutil.users())
        load = psutil.getloadavg()
    except (OSError, RuntimeError, AttributeError) as exc:
        raise NotImplementedError(f"this host cannot tell its uptime: {exc}") from exc
    return format_uptime(time.localtime(), seconds_up, users, load)
