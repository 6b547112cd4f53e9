"""The jobs of ``python -m aeron_numba.spark <job>``: each reads what the system recorded through this package's
data sources, prints a readable table and writes its result as Parquet.

A job's module has ``main(argv, prog) -> int`` (exit status 0: verdict clean, 1: verdict found problems,
2: usage or input error) and is imported only once chosen, so ``--help`` answers without starting Spark.
"""

from __future__ import annotations

#: job name -> (module with ``main(argv, prog)``, what it does)
JOBS: dict[str, tuple[str, str]] = {
    "bench-history": ("aeron_numba.spark.jobs.bench_history",
                      "benchmark history: trend plots of the ratios, a step worse than 10 % flagged as a regression"),
    "nothing-lost": ("aeron_numba.spark.jobs.nothing_lost", "chaos runs: acknowledged messages against recordings"),
}
