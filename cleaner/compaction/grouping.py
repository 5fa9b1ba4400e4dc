"""Grouping a round's segments into the cleaned segments they become (Kafka ``groupSegmentsBySize``).

Greedy from the oldest: a group starts with the next segment and takes the following one while
- the groups's ``.log`` sizes plus the candidate's stay ≤ ``segment.bytes``,
- the offset indexes' used bytes (entries × 8) stay ≤ ``segment.index.bytes``, and so do the time indexes'
  (entries × 12),
- the candidate is empty, or its estimated last offset − the group's first base offset ≤ 2^31 − 1 (a
  cleaned segment's relative offsets must fit an int32). The estimate is the next segment's base − 1, or
  ``first_uncleanable_offset − 1`` for the last candidate.
Empty segments always join, so they melt into their neighbours; each group becomes one cleaned segment based
at its first segment's base offset.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.storage.segment import LogSegment

__all__ = ["group_segments_by_size"]

_INT32_MAX = (1 << 31) - 1


def group_segments_by_size(
    segments: Sequence[LogSegment], max_size: int, max_index_size: int, first_uncleanable_offset: int
) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first]
        log_size = first.size_bytes
        index_size = first.offset_index.size_in_bytes
        time_index_size = first.time_index.size_in_bytes
        i += 1
        while i < len(segments):
            candidate = segments[i]
            if (
                log_size + candidate.size_bytes > max_size
                or index_size + candidate.offset_index.size_in_bytes > max_index_size
                or time_index_size + candidate.time_index.size_in_bytes > max_index_size
            ):
                break
            if candidate.size_bytes > 0:
                estimated_last = (
                    segments[i + 1].base_offset - 1 if i + 1 < len(segments) else first_uncleanable_offset - 1
                )
                if estimated_last - first.base_offset > _INT32_MAX:
                    break
            group.append(candidate)
            log_size += candidate.size_bytes
            index_size += candidate.offset_index.size_in_bytes
            time_index_size += candidate.time_index.size_in_bytes
            i += 1
        groups.append(group)
    return groups
