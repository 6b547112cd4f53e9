import sys

from aeron_numba.archive.archiving import main

sys.exit(main())
