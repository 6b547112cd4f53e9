import sys

from aeron_numba.driver.media_driver import main

sys.exit(main())
