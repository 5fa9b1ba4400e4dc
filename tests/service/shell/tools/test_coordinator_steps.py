"""``coordinator_steps``: the coordinator partition of a group or transactional id is Kafka's
``Utils.abs(id.hashCode()) % partitions``, Java's String hash over UTF-16 units (``Integer.MIN_VALUE`` maps
to 0, as ``Utils.abs`` has it), and a fixed batch ignores its timestamp. (Whole coordinator workloads,
decoded and compacted, are in ``test_gen_offsets.py`` and ``test_gen_txn_state.py``.)"""

from __future__ import annotations

import pytest

from service.shell.tools.coordinator_steps import coordinator_partition, fixed_batch


@pytest.mark.parametrize(
    ("owner", "partitions", "expected"),
    [
        ("hello", 50, 99_162_322 % 50),  # "hello".hashCode() == 99162322
        ("hello", 1, 0),
        ("", 50, 0),  # "".hashCode() == 0
        ("Aa", 7, 2112 % 7),  # "Aa" and "BB" share the hash 2112
        ("BB", 7, 2112 % 7),
        ("polygenelubricants", 50, 0),  # hashCode() == Integer.MIN_VALUE: Utils.abs gives 0
        ("\U0001f600", 50, (0xD83D * 31 + 0xDE00) % 50),  # a surrogate pair: two UTF-16 units
    ],
)
def test_the_partition_is_kafkas(owner: str, partitions: int, expected: int) -> None:
    assert coordinator_partition(owner, partitions) == expected


def test_a_negative_hash_counts_by_its_magnitude() -> None:
    # "polygenelubricantz" hashes to Integer.MIN_VALUE + 7 (its last unit 7 above 's'): negative
    assert coordinator_partition("polygenelubricantz", 1000) == (2**31 - 7) % 1000


def test_a_fixed_batch_is_the_same_at_any_timestamp() -> None:
    pairs = [(b"key", b"value"), (b"other", None)]
    batch = fixed_batch(pairs)

    assert batch(0) == batch(1_700_000_000_000) == pairs
