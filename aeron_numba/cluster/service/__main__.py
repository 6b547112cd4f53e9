import sys

from aeron_numba.commands.cluster_service import main

sys.exit(main())
