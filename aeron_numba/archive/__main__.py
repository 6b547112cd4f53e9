import sys

from aeron_numba.commands.archive import main

sys.exit(main())
