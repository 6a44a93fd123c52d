"""The local stack's throwaway Ceph (``tools/ceph.sh``), as ``.stack/env`` describes it, and its
``rbd`` CLI run as one of its users."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
from pathlib import Path

#: Seconds an ``rbd`` command may take.
CLI_TIMEOUT = 120


@dataclasses.dataclass(frozen=True)
class CephCluster:
    """The stack's Ceph as ``tools/ceph.sh up`` described it (``FLEETCACHE_CEPH_*``)."""

    #: The cluster's users, each with its own keyring: ``admin`` (all caps), ``glance``
    #: (rbd on pool images), ``compute`` (read-only on images), ``instances`` (rbd on pool
    #: instances, read-only on images).
    USERS = ("admin", "glance", "compute", "instances")

    conf: Path
    fsid: str
    keyrings: dict[str, Path]

    def rbd(self, user: str, *args: str, check: bool = True,
            timeout: float = CLI_TIMEOUT) -> subprocess.CompletedProcess[bytes]:
        """Run the ``rbd`` CLI as ``client.<user>`` with explicit conf and keyring.

        :raises AssertionError: when ``check`` and it exits non-zero (with its stderr).
        """
        cmd = ["rbd", "--conf", str(self.conf), "--id", user,
               "--keyring", str(self.keyrings[user]), *args]
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{shlex.join(cmd)} exited {proc.returncode}: "
                                 f"{proc.stderr.decode(errors='replace')}")
        return proc
