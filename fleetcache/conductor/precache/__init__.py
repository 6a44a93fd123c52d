"""The pre-cache workflow: have every compute of an aggregate cache a list of images.

One module per step of a job's life, as Ironic keeps one per workflow
(``ironic/conductor/deployments.py``):

* :mod:`~.precacher`: :class:`Precacher` validates a request and queues the job;
* :mod:`~.job`: :class:`~.job.PrecacheJob` plans the hosts page by page and settles every one;
* :mod:`~.hostcall` asks one compute (its ``cache_images`` call and what the reply means), on a
  worker of :mod:`~.hostpool`'s :class:`HostCallPool`, bounded across jobs;
* :mod:`~.results` checks the computes' replies and stores them in batches;
* :mod:`~.origin` holds the image service's download slots (:class:`DownloadGate`);
* :mod:`~.peers` picks each host's sources among the hosts of its peer group that hold an
  image (:class:`~.peers.PeerPlanner`, one per job run; ``[image_cache] peer_distribution``);
* :mod:`~.notifications` sends ``aggregate.cache_images.start|progress|end``;
* :mod:`~.ownership` names the conductor process that owns a job, :mod:`~.takeover` renews
  and claims job leases (:class:`JobTakeover`), :mod:`~.catchup` asks the hosts a job could
  not reach when they come back (:class:`CatchUp`), :mod:`~.windows` starts the jobs that
  waited for their window (:class:`JobWindows`).

The conductor process builds the pools, the gate and the notifier at start-up and passes them
in (``fleetcache.conductor.manager.ConductorState``)::

    precacher = Precacher(conf, db, conf.host, clients=cells, notifier=CacheNotifier(n),
                          host_calls=HostCallPool(conf.image_cache.precache_concurrency),
                          job_runner=coordinators.submit)
    job = precacher.start(ctxt, aggregate_id, image_ids)   # returns at once
"""

from fleetcache.conductor.precache.catchup import CatchUp
from fleetcache.conductor.precache.hostpool import HostCallPool
from fleetcache.conductor.precache.notifications import CacheNotifier
from fleetcache.conductor.precache.origin import DownloadGate
from fleetcache.conductor.precache.ownership import JobOwner
from fleetcache.conductor.precache.peers import PeerQuarantine
from fleetcache.conductor.precache.precacher import Precacher
from fleetcache.conductor.precache.takeover import JobTakeover
from fleetcache.conductor.precache.windows import JobWindows

__all__ = ["CacheNotifier", "CatchUp", "DownloadGate", "HostCallPool", "JobOwner",
           "JobTakeover", "JobWindows", "PeerQuarantine", "Precacher"]
