"""Compaction itself: one clean of one log (Kafka ``Cleaner``), with no threads or pool around it.

A round builds the key map over the dirty section (``offset_map``, reading segments in large chunks:
``segment_chunks``), tracks transactions as it walks the batches (``txn_metadata``), groups the segments into
the cleaned segments they become (``grouping``), applies Kafka's retention rules to every batch and record
(``rules``), writes each group's ``.cleaned`` segment (``cleaned_writer``) and swaps it back into the log
(``group_swap``); ``cleaner`` drives these steps and ``stats`` counts what the round did. ``oracle`` is the
slow reference cleaning the engines are tested against. The in-process engine runs this in the worker's
thread; the Spark engine runs the same ``clean_group`` inside its tasks.
"""

__all__: list[str] = []
