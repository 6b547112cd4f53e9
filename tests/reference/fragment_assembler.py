"""Slow, obvious reassembly of fragments per session (spec §1.4, §5), to check ``FragmentAssembler`` against.

Input: fragments as ``(session_id, term_offset, flags, payload)`` in delivery order, where a fragment
occupies ``align(32 + len(payload), 32)`` bytes of its term. Output: the whole messages delivered, in order,
as ``(session_id, payload)``.

Rules: BEGIN|END is a whole message. BEGIN starts (or restarts) a session's message. A fragment without
BEGIN continues the session's message only if one is in progress and it starts exactly where the previous
fragment of that session ended; otherwise the partial message (if any) is dropped along with the fragment.
END completes the message.
"""

BEGIN = 0x80
END = 0x40


def _next_term_offset(term_offset: int, payload_length: int) -> int:
    return term_offset + ((32 + payload_length + 31) // 32) * 32


def reassemble(fragments):
    partial = {}  # session -> (bytes so far, expected next term offset)
    delivered = []
    for session_id, term_offset, flags, payload in fragments:
        if flags & BEGIN and flags & END:
            delivered.append((session_id, bytes(payload)))
            continue
        if flags & BEGIN:
            partial[session_id] = (bytes(payload), _next_term_offset(term_offset, len(payload)))
            continue
        if session_id not in partial:
            continue
        so_far, expected = partial.pop(session_id)
        if term_offset != expected:
            continue
        so_far += bytes(payload)
        if flags & END:
            delivered.append((session_id, so_far))
        else:
            partial[session_id] = (so_far, _next_term_offset(term_offset, len(payload)))
    return delivered
