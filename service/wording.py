"""English for the lines people read: counts with the right number (``1 segment``, ``2 segments``)."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, plural unless the count is one (``plural``: an irregular plural)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
