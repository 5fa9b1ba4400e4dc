"""The core a process is built around: the LogManager (``log_manager``) and the rules it applies (retention,
what is cleanable, stray replicas), the ports the shell plugs the cleaner and the scheduler into, and what
explains it all to operators (``explain``, ``summary``, ``reports``)."""

__all__: list[str] = []
