import sys

from aeron_numba.archive.command_line import main

sys.exit(main())
