import sys

from aeron_numba.commands.driver import main

sys.exit(main())
