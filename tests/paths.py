"""Paths the tests share, whatever folder a test sits in: the repository's root, the files real Kafka wrote,
the deploy files."""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEPLOY", "FIXTURES", "REPO"]

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "kafka-written"
DEPLOY = REPO / "deploy"
