"""Leaf helpers every layer may use: the error types (``errors``), the clock (``clock``), the audit trail's
logger (``audit``) and the shared wording of durations and dates (``wording``)."""

__all__: list[str] = []
