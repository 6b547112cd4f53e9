"""The media driver: conductor, IPC publications, cnc.dat, and launching it as a process."""

from aeron_numba.driver.context import DriverContext
from aeron_numba.driver.media_driver import ActiveDriverError, MediaDriver, MediaDriverProcess

__all__ = ["ActiveDriverError", "DriverContext", "MediaDriver", "MediaDriverProcess"]
