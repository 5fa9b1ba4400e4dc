"""The service's Prometheus metrics: scrape-time collectors and the event recorders."""

__all__: list[str] = []
