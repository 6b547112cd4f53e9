import sys

from aeron_numba.archive.archive import main

sys.exit(main())
