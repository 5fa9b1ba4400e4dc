"""Kafka's scheduled log tasks (``KafkaScheduler``) on one APScheduler."""

__all__: list[str] = []
