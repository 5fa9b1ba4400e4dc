"""The service's Prometheus metrics (CONTRACT §6): scrape-time collectors and the event recorders."""

__all__: list[str] = []
