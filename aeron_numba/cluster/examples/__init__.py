"""Example clustered services (``key_value_service``: the replicated key-value store the tests and benchmarks use)."""
