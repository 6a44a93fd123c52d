"""The ``[fleetcache_privsep]`` group: oslo.privsep's options for the compute's privileged
context, listed for the sample configuration file.

oslo.privsep registers these options itself, on the global ``cfg.CONF``, when
``fleetcache.privsep`` builds its context (``PrivContext(cfg_section=GROUP)``), and reads them
there; the privsep daemon reads them from the configuration files on its command line. So this
module registers nothing on a daemon's ``ConfigOpts`` (that would be a second copy nobody
reads): it only names the group, once, and lists oslo.privsep's own option objects under it for
``oslo-config-generator``, so that an operator finds ``helper_command``, ``user`` and ``group``
in ``fleetcache.conf.sample``.
"""

from __future__ import annotations

import copy
from typing import Any

from oslo_config import cfg

#: The option group of the compute's privileged context.
GROUP = "fleetcache_privsep"

privsep_group = cfg.OptGroup(
    GROUP,
    title="The compute's privileged helper (oslo.privsep)",
    help="""
oslo.privsep's options for the compute's one privileged context (the ``rbd export`` of a
direct download from Ceph). Unset ``helper_command`` means: the ``privsep-helper`` beside the
compute's Python interpreter (a virtualenv's, which ``sudo privsep-helper`` would not find),
with the compute's configuration files. Set it (e.g. to start the helper through ``sudo``,
with ``user`` and ``group`` chosen so that only the helper can read the Ceph keyring) when the
helper must run with other credentials than the compute.

The helper reads the Ceph user, keyring, ``ceph.conf`` and timeouts of direct downloads
(``[glance] rbd_*``, ``[libvirt] rbd_user``, ``images_rbd_ceph_conf``) and
``instances_path`` from the configuration files on its own command line, never from the
compute: name the compute's files there, and pin them in the sudo rule.
""",
)


def list_opts() -> list[tuple[Any, list[Any]]]:
    """oslo.privsep's options under :data:`GROUP`, for ``oslo-config-generator`` only.

    Imported here rather than at the top: every fleetcache process imports the config
    package, and only the compute needs oslo.privsep loaded.
    """
    from oslo_privsep import priv_context

    return [(privsep_group, copy.deepcopy(priv_context.OPTS))]
