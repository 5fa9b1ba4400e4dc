"""A writer process for the batch SIGKILL test: rewrite every file of DIR in one ``AtomicBatch``, forever.

Run as ``python -m tests.service.storage.batch_writer DIR``. Round ``n`` writes ``content_for(name, n)``
into each file; each line on stdout is a round whose batch finished. The parent kills this process at a
random moment and checks that every file holds one round's complete content.
"""

from __future__ import annotations

import sys
from pathlib import Path

from service.storage.atomic_batch import write_atomically_many


def content_for(name: str, round_number: int) -> bytes:
    """Long enough that a torn write shows: the name and the round, repeated."""
    return (f"{name} round {round_number}\n" * (1 + round_number % 7)).encode()


def main(directory: Path) -> None:
    names = sorted(p.name for p in directory.iterdir() if not p.name.endswith(".tmp"))
    round_number = 0
    while True:
        round_number += 1
        write_atomically_many({directory / name: content_for(name, round_number) for name in names})
        sys.stdout.write(f"{round_number}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
