"""A follower's consensus module reading the log's application messages without the codec: of each one it needs
only which session it came from and when (the session's last activity, which a new leader times sessions out
from; a service message's id, which ends its wait to be appended). ``record_session_activity`` is a session
message handler for ``kernels/cluster_service_log.bounded_session_poll`` (the service container's compiled read
of the log, which stops before every other message for the codec): it keeps, in an activity table, each session's
last timestamp in the order the sessions were first seen, for the module to apply once per poll.

```
table:  0 row count i64 | 8 rows: clusterSessionId i64, timestamp i64
```
A poll hands over at most its fragment limit of messages, so a table of that many rows never fills.
"""

from __future__ import annotations

import numpy as np

from aeron_numba.jit import kernel
from aeron_numba.kernels import atomics
from aeron_numba.kernels.cluster_service_log import SESSION_MESSAGE_HANDLER_SIG

COUNT_OFFSET = 0
ROWS_OFFSET = 8
ROW_LENGTH = 16


def new_activity_table(capacity: int) -> np.ndarray:
    """An empty table of ``capacity`` rows (``uint8``, as a session message handler's state is)."""
    if capacity < 1:
        raise ValueError(f"capacity={capacity} must be at least 1")
    return np.zeros(ROWS_OFFSET + ROW_LENGTH * capacity, np.uint8)


@kernel(SESSION_MESSAGE_HANDLER_SIG)
def record_session_activity(state, log, offset, length, cluster_session_id, timestamp, outbox):
    """The session's row takes ``timestamp``; a session not in the table yet gets the next row (none when the
    table is full: it is sized for a poll's fragment limit, see the module docstring)."""
    count = atomics.get_int64(state, COUNT_OFFSET)
    for i in range(count):
        row = ROWS_OFFSET + ROW_LENGTH * i
        if atomics.get_int64(state, row) == cluster_session_id:
            atomics.put_int64(state, row + 8, timestamp)
            return
    row = ROWS_OFFSET + ROW_LENGTH * count
    if row + ROW_LENGTH <= state.shape[0]:
        atomics.put_int64(state, row, cluster_session_id)
        atomics.put_int64(state, row + 8, timestamp)
        atomics.put_int64(state, COUNT_OFFSET, count + 1)


def take_rows(table: np.ndarray) -> list[list[int]]:
    """The table's rows as ``[cluster session id, timestamp]`` lists, and the table emptied."""
    words = table.view(np.int64)
    count = int(words[0])
    words[0] = 0
    return words[1:1 + 2 * count].reshape(count, 2).tolist()
