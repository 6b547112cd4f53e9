"""Command-line tools that read a driver's files, after Aeron's samples: ``aeron-stat`` (AeronStat, the
counters), ``aeron-error-stat`` (ErrorStat, the distinct error log) and ``aeron-loss-stat`` (LossStat,
``loss-report.dat``). Each is ``python -m aeron_numba.tools.<name>`` and a console script; the functions that
build the output return lines, so tests check them exactly.
"""
