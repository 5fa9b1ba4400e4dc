"""The process shell: the CLI (``cli``), ``serve``'s daemon (``daemon``), the composition root that wires a
process together (``node``), systemd's readiness notices (``sd_notify``) and the offline tools (``tools``)."""

__all__: list[str] = []
