"""``fleetcache``: the operator's command line (:mod:`fleetcache.client.cli`) and
``fleetcache demo``, the embedded demo (:mod:`fleetcache.demo`).

The demo runs the very conductor and compute services that ``fleetcache-conductor`` and
``fleetcache-compute`` build (:func:`fleetcache.cmd.conductor.build_service`,
:func:`fleetcache.cmd.compute.build_service`): this entry point hands them to it, since
neither the client nor the demo may import ``cmd/``, the room above them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fleetcache.client import cli


def _demo(args: argparse.Namespace) -> int:
    # The demo pulls in every role: load it only here.
    from fleetcache import demo
    from fleetcache.cmd import compute, conductor

    builders = demo.Builders(conductor=conductor.build_service, compute=compute.build_service)
    return demo.run(builders, hosts=int(args.hosts), keep=bool(args.keep),
                    verbose=bool(args.verbose))


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, demo=_demo)


if __name__ == "__main__":
    sys.exit(main())
