"""Configuration: Kafka's server.properties syntax, Kafka's names and defaults."""

__all__: list[str] = []
