"""A consensus module process for the integration tests (until the node command of branch cluster-node is merged):
its settings from ``AERON_CLUSTER_*`` / ``AERON_DIR`` variables, as the node command reads them.

    python -m tests.integration.cluster.cm_worker

Prints ``consensus module ready`` once constructed (mark file, counters), then runs until SIGTERM or the cluster
terminates; exit 0 on an orderly stop."""

from __future__ import annotations

import logging
import sys

from aeron_numba.cluster.consensus_module import ConsensusModule
from aeron_numba.cluster.context import ConsensusModuleContext


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(name)s %(message)s")
    ctx = ConsensusModuleContext.from_env().conclude()
    module = ConsensusModule(ctx)
    print("consensus module ready", flush=True)
    module.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
