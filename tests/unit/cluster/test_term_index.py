"""TermIndex: a map from term id to entry index whose slot order is Agrona's (what ClusterTool's
``cacheIndex={...}`` shows)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aeron_numba.cluster.term_index import TermIndex


def test_golden_order_two_terms():
    # Aeron 1.48's ClusterTool printed node 0's map as {1=3, 0=0}: term 1 sits in a higher slot than term 0.
    index = TermIndex()
    index.put(0, 0)
    index.put(1, 3)
    assert str(index) == "{1=3, 0=0}"
    assert str(TermIndex()) == "{}"


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(-3, 40), st.integers(0, 1000)), max_size=60))
def test_term_index_behaves_as_a_map_through_puts_removes_and_growth(operations):
    index, model = TermIndex(), {}
    for is_put, key, value in operations:
        if is_put:
            index.put(key, value)
            model[key] = value
        else:
            index.remove(key)
            model.pop(key, None)
        assert dict(index.items()) == model and len(index.items()) == len(model)
    for key in range(-3, 41):
        assert index.get(key) == model.get(key, -1) and (key in index) == (key in model)
