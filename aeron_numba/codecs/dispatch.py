"""What every adapter checks of its listener at construction (DESIGN.md "Protocols"): that a decision method
can be called the way the adapter will call it, with the protocol's context arguments and then every decoded
field by name. Used by the SBE adapters (``sbe_adapter.py``) and the driver's ``ClientCommandAdapter``."""

from __future__ import annotations

import inspect
from typing import Callable, Iterable


def call_mismatch(handler: Callable, field_names: Iterable[str], context: tuple[str, ...] = ()) -> str | None:
    """Why ``handler(*context, **fields)`` could not be called with these names, or None if it can."""
    try:
        inspect.signature(handler).bind(*context, **dict.fromkeys(field_names))
    except TypeError as exc:
        return str(exc)
    return None
