"""What the API needs of the node (``LogService``), its settings, and the routes' ``Annotated`` aliases.

``service.shell.node.NodeView`` satisfies ``LogService`` structurally: the API never imports the node, the
daemon, ``scheduler/`` or ``cleaner/``, and tests can hand in anything shaped the same. ``ApiContext`` is
built once by ``create_app``; ``admin_lock`` serialises the multi-step topic changes (create with configs,
delete, config patch) so that two of them cannot interleave. Reads and appends take only the logs' own
locks.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Protocol

from fastapi import Depends, Path, Request

from api.models import INT32_MAX, StrictDigits, TopicName
from api.record_models import ProduceRequest
from service.base.errors import NotFoundError
from service.config.broker_config import BrokerConfig
from service.config.topic_store import TopicConfigStore
from service.core.log_manager import LogManager
from service.core.ports import CleanerView, SummaryView
from service.metadata.source import MetadataSource
from service.storage.log import PartitionLog
from service.storage.topic_partition import TopicPartition

__all__ = [
    "ApiContext",
    "ApiSettings",
    "Context",
    "JobStatusView",
    "JobsView",
    "LogService",
    "PartitionId",
    "TopicPath",
    "find_log",
]


class JobStatusView(Protocol):
    """One scheduled task as ``GET /v1/scheduler/jobs`` shows it (the scheduler's ``JobStatus``)."""

    @property
    def name(self) -> str: ...
    @property
    def period_ms(self) -> int | None: ...
    @property
    def runs(self) -> int: ...
    @property
    def failures(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def last_run_ms(self) -> int | None: ...
    @property
    def last_duration_ms(self) -> int | None: ...
    @property
    def last_error(self) -> str | None: ...
    @property
    def next_run_ms(self) -> int | None: ...


class JobsView(Protocol):
    def jobs(self) -> Sequence[JobStatusView]: ...


class LogService(Protocol):
    """The node's surface the API uses (``service.shell.node.NodeView`` has exactly these)."""

    @property
    def broker(self) -> BrokerConfig: ...
    @property
    def log_manager(self) -> LogManager: ...
    @property
    def topic_store(self) -> TopicConfigStore: ...
    @property
    def metadata(self) -> MetadataSource: ...
    @property
    def scheduler(self) -> JobsView: ...
    @property
    def cleaner_view(self) -> CleanerView | None: ...
    @property
    def explain_summary(self) -> SummaryView: ...

    def refresh_topic_configs(self) -> None:
        """Apply changed topic overrides to the live logs."""
        ...


@dataclass(frozen=True, slots=True)
class ApiSettings:
    """The ``api.*`` keys the request handling obeys, plus our limits."""

    max_request_bytes: int = 10_485_760
    max_records_per_request: int = 10_000
    max_fetch_records: int = 10_000
    max_fetch_bytes: int = 52_428_800
    auth_token: str | None = None
    bound_host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()

    @classmethod
    def from_broker(cls, broker: BrokerConfig, *, auth_token: str | None) -> ApiSettings:
        return cls(
            bound_host=broker.api_host,
            allowed_hosts=broker.api_allowed_hosts,
            allowed_origins=broker.api_allowed_origins,
            max_request_bytes=broker.api_max_request_bytes,
            max_records_per_request=broker.api_max_records_per_request,
            max_fetch_records=broker.api_max_fetch_records,
            max_fetch_bytes=broker.api_max_fetch_bytes,
            auth_token=auth_token,
        )


@dataclass(frozen=True, slots=True)
class ApiContext:
    service: LogService
    settings: ApiSettings
    produce_model: type[ProduceRequest]  # records capped at settings.max_records_per_request
    admin_lock: threading.Lock = field(default_factory=threading.Lock)


async def _context(request: Request) -> ApiContext:
    context = request.app.state.context
    if not isinstance(context, ApiContext):  # set by create_app; anything else is a wiring bug
        raise TypeError(f"app.state.context is {context!r}")
    return context


Context = Annotated[ApiContext, Depends(_context)]
TopicPath = Annotated[TopicName, Path(description="Topic name (Kafka's rule)")]
PartitionId = Annotated[int, StrictDigits, Path(ge=0, le=INT32_MAX, description="Partition number")]


def find_log(context: ApiContext, topic: str, partition: int) -> PartitionLog:
    """The live log of ``topic``-``partition``; ``NotFoundError`` says whether the topic or partition."""
    manager = context.service.log_manager
    try:
        return manager.get_log(TopicPartition(topic, partition))
    except NotFoundError as exc:
        tp = TopicPartition(topic, partition)
        if tp in manager.failed_partitions or any(s.topic_partition == tp for s in manager.stray_replicas):
            raise exc from None  # names the load failure or the stray replica
        partitions = manager.topics().get(topic)
        if partitions is None:
            raise NotFoundError(f"topic {topic!r} does not exist") from None
        raise NotFoundError(
            f"topic {topic!r} has no partition {partition} (it has {len(partitions)})"
        ) from None
