"""``TermIndex``: recording.log's map from each valid leadership term id to its place in the sorted entries.

A dict would do for lookups; it is kept as Agrona's ``Long2LongHashMap`` keeps it because ClusterTool prints the map
(``cacheIndex={1=3, 0=0}``) in that map's slot order: open addressing over 8 slots at first, doubling past a load
factor of 0.65, Agrona 2's 64-bit mix hash doubled into even slots, linear probing, chains closed up on removal, and
iteration downwards through the slots.
"""

from __future__ import annotations

from aeron_numba.layout.bits import NULL_VALUE


class TermIndex:
    """Valid term id -> index in the sorted entries (-1 when absent), in Agrona's slot layout."""

    _LOAD_FACTOR = 0.65
    _MIN_CAPACITY = 8
    _MISSING = NULL_VALUE

    def __init__(self) -> None:
        self._size = 0
        self._resize(self._MIN_CAPACITY)

    def _resize(self, capacity: int) -> None:
        old = getattr(self, "_slots", [])
        self._capacity = capacity
        self._threshold = int(capacity * self._LOAD_FACTOR)
        self._slots: list[list[int] | None] = [None] * capacity
        for pair in old:
            if pair is not None:
                slot = self._home(pair[0])
                while self._slots[slot] is not None:
                    slot = (slot + 1) % capacity
                self._slots[slot] = pair

    @staticmethod
    def _mix(key: int) -> int:
        # Agrona's Hashing.hash(long) then evenHash: a 64-bit mix folded to 32 bits, doubled into even slots.
        mask64 = (1 << 64) - 1
        x = key & mask64
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask64
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask64
        x ^= x >> 31
        return (x ^ (x >> 32)) & 0xFFFF_FFFF

    def _home(self, key: int) -> int:
        h = self._mix(key)
        even = (h << 1) - (h << 8)
        return (even & (2 * self._capacity - 1)) >> 1  # Agrona's key index / 2: the pair's slot

    def _find(self, key: int) -> int:
        slot = self._home(key)
        while self._slots[slot] is not None:
            if self._slots[slot][0] == key:
                return slot
            slot = (slot + 1) % self._capacity
        return -1 - slot  # the empty slot where it would go

    def get(self, key: int) -> int:
        slot = self._find(key)
        return self._slots[slot][1] if slot >= 0 else self._MISSING

    def __contains__(self, key: int) -> bool:
        return self._find(key) >= 0

    def put(self, key: int, value: int) -> None:
        slot = self._find(key)
        if slot >= 0:
            self._slots[slot][1] = value
            return
        self._slots[-1 - slot] = [key, value]
        self._size += 1
        if self._size > self._threshold:
            self._resize(self._capacity * 2)

    def remove(self, key: int) -> None:
        slot = self._find(key)
        if slot < 0:
            return
        self._slots[slot] = None
        self._size -= 1
        # Close the gap: move later members of the probe chain back (Agrona's compactChain).
        deleted, probe = slot, slot
        while True:
            probe = (probe + 1) % self._capacity
            pair = self._slots[probe]
            if pair is None:
                return
            home = self._home(pair[0])
            if ((probe < home and (home <= deleted or deleted <= probe))
                    or (home <= deleted <= probe)):
                self._slots[deleted], self._slots[probe] = pair, None
                deleted = probe

    def clear_and_compact(self) -> None:
        self._slots = []
        self._size = 0
        self._resize(self._MIN_CAPACITY)

    def items(self) -> list[tuple[int, int]]:
        """(term id, index) in Agrona's iteration order: slots walked downwards, starting below the first
        empty slot when the last slot is taken (so a chain that wraps is not split)."""
        n = self._capacity
        stop = n
        if self._slots[n - 1] is not None:
            stop = next((i for i in range(n) if self._slots[i] is None), n)
        out = []
        for i in range(stop + n - 1, stop - 1, -1):
            pair = self._slots[i % n]
            if pair is not None:
                out.append((pair[0], pair[1]))
        return out

    def shift_after(self, leadership_term_id: int) -> None:
        """Every index of a term after ``leadership_term_id`` moves one place (an entry was inserted before)."""
        for pair in self._slots:
            if pair is not None and pair[0] > leadership_term_id:
                pair[1] += 1

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k}={v}" for k, v in self.items()) + "}"
