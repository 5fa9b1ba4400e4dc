"""What the API needs of the node (``LogService``), its settings, and the routes' ``Annotated`` aliases.

``service.shell.node.NodeView`` satisfies ``LogService`` structurally: the API never imports the node, the
daemon, ``scheduler/`` or ``cleaner/``, and tests can hand in anything shaped the same. The logs are
reached through the core's port (``service.core.ports.LogQueries``), never a LogManager, a log or a lock.
``ApiContext`` is built once by ``create_app``; ``admin_lock`` serialises the multi-step topic changes
(create with configs, delete, config patch) so that two of them cannot interleave. ``on_fetch_fault`` is
told each fetch that met corrupt or missing data (``logcleaner_fetch_faults_total``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Protocol

from fastapi import Depends, Path, Request

from api.models import INT32_MAX, StrictDigits, TopicName
from api.record_models import ProduceRequest
from service.config.broker_config import BrokerConfig
from service.core.ports import CleanerView, LogQueries, PartitionRecords, SummaryView
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
    def logs(self) -> LogQueries: ...
    @property
    def scheduler(self) -> JobsView: ...
    @property
    def cleaner_view(self) -> CleanerView | None: ...
    @property
    def explain_summary(self) -> SummaryView: ...


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
    on_fetch_fault: Callable[[str], None]  # told each fault a fetch met (``api.fetch.FetchFaultRecorder``)
    admin_lock: threading.Lock = field(default_factory=threading.Lock)


async def _context(request: Request) -> ApiContext:
    context = request.app.state.context
    if not isinstance(context, ApiContext):  # set by create_app; anything else is a wiring bug
        raise TypeError(f"app.state.context is {context!r}")
    return context


Context = Annotated[ApiContext, Depends(_context)]
TopicPath = Annotated[TopicName, Path(description="Topic name (Kafka's rule)")]
PartitionId = Annotated[int, StrictDigits, Path(ge=0, le=INT32_MAX, description="Partition number")]


def find_log(context: ApiContext, topic: str, partition: int) -> PartitionRecords:
    """The live log of ``topic``-``partition``; ``NotFoundError`` says whether the topic or partition."""
    return context.service.logs.partition(TopicPartition(topic, partition))
