"""``/v1/topics``: list, create, describe, delete (Kafka's async rename-then-delete), and their configs.

Topic overrides go to the durable ``TopicConfigStore`` and reach the live logs at once
(``refresh_topic_configs``), as a broker applies ``AlterConfigs`` without a restart.
"""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from api.deps import Context, LogService, TopicPath
from api.json_body import BoundedJsonRoute
from api.models import (
    ConfigPatchRequest,
    CreateTopicRequest,
    TopicConfigs,
    TopicDeleted,
    TopicDetail,
    TopicList,
)
from api.problems import ApiProblem, FieldError, problem_responses
from service.base.errors import ConflictError, NotFoundError
from service.config.definitions import InvalidConfigError
from service.config.topic_config import (
    ConfigEntry,
    topic_config_def,
    typed_overrides,
    validate_topic_overrides,
)
from service.core.reports import topic_config_document

__all__ = ["router"]

router = APIRouter(prefix="/v1/topics", tags=["topics"], route_class=BoundedJsonRoute)


@router.get("", response_model=TopicList)
def list_topics(context: Context) -> TopicList:
    """Every topic, its partition count, and its partitions on an offline log dir."""
    logs = context.service.logs
    topics = logs.topics()
    offline: dict[str, list[int]] = {}
    for tp in logs.offline_partitions():
        offline.setdefault(tp.topic, []).append(tp.partition)
    return TopicList.model_validate(
        {
            "topics": [
                {"name": name, "partitions": len(parts), "offline_partitions": offline.get(name, [])}
                for name, parts in topics.items()
            ]
        }
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=TopicDetail,
    responses=problem_responses(409, 422),
)
def create_topic(context: Context, body: CreateTopicRequest, response: Response) -> TopicDetail:
    """Create a topic with ``partitions`` (default ``num.partitions``) and config overrides."""
    service = context.service
    logs = service.logs
    overrides = _validated({f"configs.{k}": (k, v) for k, v in body.configs.items()})
    partitions = body.partitions or service.broker.num_partitions
    with context.admin_lock:
        if body.name in logs.topics():
            raise ConflictError(f"topic {body.name!r} already exists")
        previous = logs.overrides(body.name)
        if overrides:  # stored first: the new logs are created with them
            logs.update_overrides(body.name, overrides)
        try:
            logs.create_topic(body.name, partitions)
        except BaseException:
            if overrides:
                logs.update_overrides(body.name, previous, [k for k in overrides if k not in previous])
            raise
    if overrides:
        logs.refresh_topic_configs()
    response.headers["Location"] = f"/v1/topics/{body.name}"
    return topic_detail(service, body.name)


@router.get("/{topic}", response_model=TopicDetail, responses=problem_responses(404, 422))
def get_topic(context: Context, topic: TopicPath) -> TopicDetail:
    """The topic's partitions (offsets, size, segment count) and its config overrides."""
    return topic_detail(context.service, topic)


@router.delete(
    "/{topic}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TopicDeleted,
    responses=problem_responses(404, 422),
)
def delete_topic(context: Context, topic: TopicPath) -> TopicDeleted:
    """Kafka's asynchronous delete: each partition dir is renamed ``-delete`` now and removed after
    ``log.segment.delete.delay.ms``. The topic's overrides are removed too."""
    with context.admin_lock:
        doomed = context.service.logs.delete_topic(topic)
    return TopicDeleted(name=topic, partitions=sorted(tp.partition for tp in doomed))


@router.get("/{topic}/configs", response_model=TopicConfigs, responses=problem_responses(404, 422))
def get_configs(context: Context, topic: TopicPath) -> TopicConfigs:
    """Every topic config with its effective value and source (``default``, ``broker``, ``topic``: the
    topic's own, logcleaner's override or the metadata log's; ``GET /v1/topics/{t}`` tells them apart)."""
    _require_topic(context.service, topic)
    return _configs(context.service, topic)


@router.patch("/{topic}/configs", response_model=TopicConfigs, responses=problem_responses(404, 422))
def patch_configs(context: Context, topic: TopicPath, body: ConfigPatchRequest) -> TopicConfigs:
    """Set and delete overrides, durably; they apply to the live logs without a restart."""
    service = context.service
    changes = _validated({f"set.{k}": (k, v) for k, v in body.set.items()})
    errors = []
    for i, name in enumerate(body.delete):
        try:
            topic_config_def(name)
        except InvalidConfigError as exc:
            errors.append(FieldError(field=f"delete[{i}]", message=str(exc)))
        if name in changes:
            errors.append(FieldError(field=f"delete[{i}]", message=f"{name!r} is also set in this request"))
    _raise_if_any(errors)
    with context.admin_lock:
        _require_topic(service, topic)
        service.logs.update_overrides(topic, changes, body.delete)
    service.logs.refresh_topic_configs()
    return _configs(service, topic)


def topic_detail(service: LogService, topic: str) -> TopicDetail:
    _require_topic(service, topic)
    logs = service.logs
    return TopicDetail.model_validate(
        {
            "name": topic,
            **logs.topic_logs(topic),
            "configs": typed_overrides(logs.overrides(topic)),
            "effective_configs": topic_config_document(topic, _entries(service, topic))["configs"],
        }
    )


def _require_topic(service: LogService, topic: str) -> list[int]:
    partitions = service.logs.topics().get(topic)
    if partitions is None:
        raise NotFoundError(f"topic {topic!r} does not exist")
    return partitions


def _entries(service: LogService, topic: str) -> dict[str, ConfigEntry]:
    return service.logs.config_entries(topic)


def _configs(service: LogService, topic: str) -> TopicConfigs:
    """The ``/configs`` document: each effective value, typed, with its source named as everywhere else
    (``override``, ``metadata``, ``internal-topic-default``, ``broker-dynamic``, ``broker``, ``default``,
    ``unknown``)."""
    doc = {
        "topic": topic,
        "configs": [
            {"name": e.name, "value": e.value, "source": e.source} for e in _entries(service, topic).values()
        ],
    }
    return TopicConfigs.model_validate(doc)


def _validated(changes: dict[str, tuple[str, object]]) -> dict[str, str]:
    """Each ``field → (config name, value)`` checked; all bad fields in one 422, else Kafka's strings."""
    out: dict[str, str] = {}
    errors = []
    for field, (name, value) in changes.items():
        try:
            out.update(validate_topic_overrides({name: value}))
        except InvalidConfigError as exc:
            errors.append(FieldError(field=field, message=str(exc)))
    _raise_if_any(errors)
    return out


def _raise_if_any(errors: list[FieldError]) -> None:
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ApiProblem(422, f"{errors[0].field}: {errors[0].message}{more}", errors=errors)
