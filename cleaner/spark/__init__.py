"""Compaction on Spark: the same round as ``cleaner.engine``'s in-process one, its records handled in Spark
tasks (pyspark only in here).

On the driver, ``engine.SparkEngine`` plans each log's round (``round_plan``: bounds, groups, each group's
starting transaction state), turns a job's logs into rewrite tasks (``jobs``), runs the job as one Spark
action in the worker's pool of the process's session (``actions``, ``session``) and swaps each log's
cleaned groups back in as soon as its tasks have reported. In the tasks, the key map is built by key class
(``partial_maps``, over ``segment_splits``) and each group rewritten by ``compaction``'s ``clean_group``
(``rewrite``); the driver and the tasks coordinate through files in each log's dir (``task_files``: the
ticket, the reports, the claims). ``worker_daemon`` is Spark's Python worker daemon with those modules
imported once; ``data_source`` is the ``kafka-log`` data source, segment files as a Spark table.
"""

__all__: list[str] = []
