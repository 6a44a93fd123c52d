"""The compute's one privileged context (oslo.privsep) and how its helper starts.

Entrypoints live in modules of this package, each taking only arguments it checks itself:
:mod:`fleetcache.privsep.rbd` (``rbd export`` of a Glance image into ``_base``).

Capabilities: none. The one entrypoint runs ``rbd export`` with an explicit keyring and
writes into a FIFO the compute created in its own ``_base``; neither needs a capability when
the daemon runs as the compute's user. Keeping a capability would not even reach ``rbd``: a
process that is not uid 0 loses its capabilities across ``execve`` (no ambient or file
capabilities are set), and one that is uid 0 regains the full set there. What the context
separates is the *keyring*: started through ``sudo`` (``[fleetcache_privsep] helper_command``)
with ``user`` = the compute's user and ``group`` = one that may read the keyring (e.g.
``ceph``, keyring mode 0640), the daemon and its ``rbd`` can read it and the compute cannot.
The compute then names only a pool/image/snapshot (well-formed names, nothing more) and a FIFO
in ``_base``; the Ceph user, keyring, ``ceph.conf``, timeouts and ``_base`` itself are the
daemon's, read from the configuration files on its command line. Which images it can read is
up to that Ceph user's caps (``profile rbd-read-only pool=images``), and the separation holds
only while the compute cannot pick those files: root-owned, and a sudo rule that pins the
helper's whole command line (``docs/ceph.md``).

The helper: oslo.privsep's default command is ``sudo privsep-helper``, which fails in a
virtualenv (sudo's ``secure_path`` lacks the venv's ``bin``; the client then reports
``FailedToDropPrivileges``). :func:`configure` therefore names the ``privsep-helper`` beside
the running interpreter, with the compute's own configuration files (the helper reads only the
files on its command line). oslo.privsep keeps its options on the global ``cfg.CONF``; this
module is the one place that sets them.
"""

from __future__ import annotations

import os
import shlex
import sys

from oslo_config import cfg
from oslo_privsep import priv_context

from fleetcache.common.config import privsep as privsep_config

#: The option group of the context (``[fleetcache_privsep]``: ``helper_command``, ``user``,
#: ``group``, ``capabilities``, ``thread_pool_size``, ``logger_name``; listed in the sample
#: configuration file by :mod:`fleetcache.common.config.privsep`).
CFG_SECTION = privsep_config.GROUP

compute_ctx = priv_context.PrivContext(
    "fleetcache.privsep",
    cfg_section=CFG_SECTION,
    pypath=__name__ + ".compute_ctx",
    capabilities=[],
)


def helper_command(conf: cfg.ConfigOpts, bindir: str | None = None) -> list[str]:
    """The command that starts the privsep daemon: the ``privsep-helper`` of this
    interpreter's ``bin`` (a venv's, not sudo's PATH) with ``conf``'s configuration files."""
    bindir = bindir or os.path.dirname(sys.executable)
    cmd = [os.path.join(bindir, "privsep-helper")]
    for path in conf.config_file or ():
        cmd += ["--config-file", os.path.abspath(path)]
    for path in getattr(conf, "config_dir", None) or ():
        cmd += ["--config-dir", os.path.abspath(path)]
    return cmd


def configure(conf: cfg.ConfigOpts) -> None:
    """Make the context start its daemon with :func:`helper_command`, unless
    ``[fleetcache_privsep] helper_command`` is set in ``conf``'s files (e.g. to add ``sudo``).
    Called once by the compute service at start-up."""
    configured = _configured_helper(conf)
    command = configured or shlex.join(helper_command(conf))
    cfg.CONF.set_override("helper_command", command, group=CFG_SECTION)


def _configured_helper(conf: cfg.ConfigOpts) -> str | None:
    """``[fleetcache_privsep] helper_command`` as ``conf``'s files set it (read on a private
    ConfigOpts: the compute's own does not register oslo.privsep's options)."""
    files = list(conf.config_file or ())
    if not files:
        return None
    probe = cfg.ConfigOpts()
    probe.register_opt(cfg.StrOpt("helper_command"), group=CFG_SECTION)
    probe(args=[], default_config_files=files, use_env=False)
    value: str | None = probe[CFG_SECTION].helper_command
    return value or None
