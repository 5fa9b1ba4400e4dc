"""Slot values that put each segment group in its own Spark partition: one rewrite task per group.

``df.repartition(n, "slot")`` sends a row to partition ``pmod(murmur3(slot, seed 42), n)`` (Spark's
``HashPartitioning``). Group ids 0..n-1 would collide (two groups in one task, another task idle); instead
group i gets the smallest free int whose hash lands in partition i. Should Spark ever hash differently,
groups only share tasks (the rewrite handles several groups per task): slower, never wrong.
"""

from __future__ import annotations

__all__ = ["murmur3_int", "slots_for"]

_SEED = 42
_MASK = 0xFFFFFFFF


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def murmur3_int(value: int, seed: int = _SEED) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (what ``hash(int_col)`` returns), as a signed int32."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & _MASK
    h1 = (seed & _MASK) ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # the input length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >= 1 << 31 else h1


def slots_for(partitions: int) -> list[int]:
    """``slots[i]``: an int that ``repartition(partitions, slot)`` sends to partition i (distinct values)."""
    slots: list[int | None] = [None] * partitions
    free = partitions
    candidate = 0
    while free:
        target = murmur3_int(candidate) % partitions
        if slots[target] is None:
            slots[target] = candidate
            free -= 1
        candidate += 1
    return [s for s in slots if s is not None]
