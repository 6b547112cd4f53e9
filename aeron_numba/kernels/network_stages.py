"""Stages: compiled work of another agent on the driver's thread, run by the network cycles after each pass.

A stage is an ``@kernel`` function ``stage(state_address) -> work`` over an ``int64`` state array of its own, found
by address (``memory.int64s_at``). The network cycles (``network_duty_cycle.run_network_cycles``) call every stage
of their table after each pass's receiving, so what a datagram put into a log is taken on in the same compiled
stretch (a cluster member's archive recording its log), and what a stage offered is sent in the next pass. A table
row is the stage's function address (``stage_address``: numba's C wrapper of the compiled function, looked up once)
and its state's address; the owner keeps both alive while the row is in a table.

A stage never blocks and does at most a bounded amount of work per call; what it cannot do it leaves where its
agent's watch sees it (a frame still at a reader's position), so that agent's Python cycle takes it.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from aeron_numba.jit import kernel

STAGE_SIG = types.int64(types.int64)
#: Columns of a stage table: the function's address and its state's address.
STAGE_FUNCTION, STAGE_STATE = 0, 1
STAGE_COLUMNS = 2
#: An image as a stage's state names it (one row of words; ``driver/network_stages.fill_image_rows`` writes them):
#: its log's address and length, its subscriber position word's address, its handle's closed word's address.
(IMAGE_LOG_ADDRESS, IMAGE_LOG_LENGTH, IMAGE_POSITION_ADDRESS, IMAGE_CLOSED_ADDRESS) = range(4)
IMAGE_WORDS = 4


@intrinsic
def _call_stage(typingctx, function_address, state_address):
    if not (isinstance(function_address, types.Integer) and isinstance(state_address, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        function = builder.inttoptr(context.cast(builder, args[0], sig.args[0], types.int64),
                                    ir.FunctionType(i64, [i64]).as_pointer())
        return builder.call(function, [context.cast(builder, args[1], sig.args[1], types.int64)])

    return types.int64(function_address, state_address), codegen


_PYTHON_STAGES: dict[int, object] = {}  # under NUMBA_DISABLE_JIT: a stage's key -> its plain function

if numba.config.DISABLE_JIT:

    def _call_stage(function_address, state_address):  # noqa: F811
        return _PYTHON_STAGES[int(function_address)](int(state_address))


@kernel
def run_stages(stages, stage_count):
    """Call the first ``stage_count`` stages of ``stages`` in order; the sum of their work."""
    work = 0
    for i in range(stage_count):
        work += _call_stage(stages[i, STAGE_FUNCTION], stages[i, STAGE_STATE])
    return work


_ADDRESSES: dict[object, int] = {}


def stage_address(dispatcher) -> int:
    """The address a stage table calls ``dispatcher`` (an ``@kernel`` stage) at: numba's C wrapper of its compiled
    ``int64(int64)`` version (compiled or loaded from the cache on first use). Under ``NUMBA_DISABLE_JIT`` a key
    the plain Python call finds it by."""
    address = _ADDRESSES.get(dispatcher)
    if address is None:
        if numba.config.DISABLE_JIT:
            address = len(_PYTHON_STAGES) + 1
            _PYTHON_STAGES[address] = dispatcher
        else:
            from numba.experimental.function_type import _get_wrapper_address

            address = _get_wrapper_address(dispatcher, STAGE_SIG)
        _ADDRESSES[dispatcher] = address
    return address
