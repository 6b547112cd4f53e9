import sys

from aeron_numba.driver.command_line import main

sys.exit(main())
