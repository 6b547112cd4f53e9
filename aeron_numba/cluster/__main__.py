import sys

from aeron_numba.commands.cluster import main

sys.exit(main())
