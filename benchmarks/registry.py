"""Which function plays which role of which benchmark implementation (``impl`` name -> role -> function)."""

from __future__ import annotations

from typing import Callable


def roles() -> dict[str, dict[str, Callable]]:
    from benchmarks import fixed_rate, floors, ipc_rtt, ipc_throughput, peers, udp

    table: dict[str, dict[str, Callable]] = {}
    for module in (ipc_rtt, floors, peers, ipc_throughput, fixed_rate, udp):
        overlap = table.keys() & module.ROLES.keys()
        if overlap:
            raise RuntimeError(f"{module.__name__} redefines {sorted(overlap)}")
        table.update(module.ROLES)
    return table


def role_function(impl: str, role: str) -> Callable:
    table = roles()
    if impl not in table:
        raise KeyError(f"unknown benchmark implementation {impl!r}; known: {sorted(table)}")
    return table[impl][role]
