"""``logcleaner gen``'s command line: the options of every workload, checked and handed to its generator
(``gen`` for keyed records, ``gen_offsets`` and ``gen_txn_state`` for the coordinators' topics)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from service.shell.tools.gen import (
    CLEANUP_POLICIES,
    DEFAULT_FUTURE_MS,
    IDEMPOTENT_PRODUCER_ID,
    MAX_SEGMENT_BYTES,
    MIN_SEGMENT_BYTES,
    TRANSACTIONAL_PRODUCER_ID,
    GenOptions,
    generate,
)
from service.shell.tools.gen_offsets import OFFSETS_SEGMENT_BYTES, OffsetsWorkload, generate_consumer_offsets
from service.shell.tools.gen_txn_state import (
    TRANSACTION_STATE_SEGMENT_BYTES,
    TransactionStateWorkload,
    generate_transaction_state,
)
from service.shell.tools.workload_dir import GenResult
from service.storage.compression import CompressionType, compression_from_name
from service.storage.log_config import LogConfig
from service.storage.log_files import (
    METADATA_TOPIC,
    METADATA_TOPIC_CREATION_PROHIBITED,
    is_valid_topic_name,
)

__all__ = ["gen_command"]

_DEFAULT_CONFIG = LogConfig()


def _check_topic_names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    for topic in value:
        if not is_valid_topic_name(topic):
            raise click.BadParameter(
                f"{topic!r} is not a valid topic name: 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'"
            )
        if topic == METADATA_TOPIC:  # the broker's own log: writing records into it would corrupt it
            raise click.BadParameter(METADATA_TOPIC_CREATION_PROHIBITED)
    if len(set(value)) != len(value):
        raise click.BadParameter("a topic is named twice")
    return value


_COUNT = click.IntRange(min=0)
_POSITIVE = click.IntRange(min=1)
_FRACTION = click.FloatRange(0.0, 1.0)


@click.command("gen")
@click.option("--log-dir", required=True, type=click.Path(file_okay=False, path_type=Path), help="Log dir.")
@click.option("--topics", "topic_count", type=_POSITIVE, help="Number of topics gen-0, gen-1, ... [1]")
@click.option(
    "--topic", "topic_names", multiple=True, callback=_check_topic_names, help="Topic (repeatable)."
)
@click.option("--partitions", type=_POSITIVE, default=1, show_default=True, help="Partitions per topic.")
@click.option("--records", type=_COUNT, default=10_000, show_default=True, help="Records per partition.")
@click.option("--batch-size", type=_POSITIVE, default=500, show_default=True, help="Records per batch.")
@click.option(
    "--keys", type=_POSITIVE, help="Key cardinality: keys are key-<i>, drawn uniformly. [--records]"
)
@click.option("--value-size", type=_COUNT, default=100, show_default=True, help="Value size in bytes.")
@click.option("--tombstones", type=_FRACTION, default=0.0, show_default=True, help="Share of null values.")
@click.option("--timestamp-start", type=_COUNT, help="First record timestamp, ms. [now - spread]")
@click.option("--timestamp-spread", type=_COUNT, default=0, show_default=True, help="Timestamp range, ms.")
@click.option(
    "--future-share", type=_FRACTION, default=0.0, show_default=True, help="Share of future batches."
)
@click.option("--future-ms", type=_COUNT, default=DEFAULT_FUTURE_MS, show_default=True, help="How far ahead.")
@click.option(
    "--compression",
    type=click.Choice([c.label for c in CompressionType]),
    default="none",
    show_default=True,
    help="Batch codec.",
)
@click.option(
    "--segment-bytes",
    type=click.IntRange(MIN_SEGMENT_BYTES, MAX_SEGMENT_BYTES),
    default=_DEFAULT_CONFIG.segment_bytes,
    show_default=True,
    help="segment.bytes of the generated logs.",
)
@click.option(
    "--cleanup-policy",
    type=click.Choice(list(CLEANUP_POLICIES)),
    default="delete",
    show_default=True,
    help="cleanup.policy (compact needs keys: every generated record has one).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed, for reproducible runs.")
@click.option(
    "--idempotent",
    is_flag=True,
    help="Write the batches as an idempotent producer does (Kafka's default since 3.0): producer id "
    f"{IDEMPOTENT_PRODUCER_ID}, epoch 0, sequences from 0 in each partition (a re-run goes on from its "
    "last).",
)
@click.option(
    "--transaction-batches",
    type=_COUNT,
    default=0,
    show_default=True,
    help="Write as a transactional producer does (producer id "
    f"{TRANSACTIONAL_PRODUCER_ID}, epoch 0): a COMMIT marker after every N batches of a partition and "
    "after its last; 0: no transactions.",
)
@click.option(
    "--aborted-transactions",
    "aborted_share",
    type=_FRACTION,
    default=0.0,
    show_default=True,
    help="Share of the transactions that end with an ABORT marker instead (transaction-state: that are "
    "aborted).",
)
@click.option(
    "--workload",
    type=click.Choice(["records", "consumer-offsets", "transaction-state"]),
    default="records",
    show_default=True,
    help="records: keyed records into the topics; consumer-offsets: a group coordinator's "
    "__consumer_offsets; transaction-state: a transaction coordinator's __transaction_state.",
)
@click.option("--groups", type=_POSITIVE, default=10, show_default=True, help="consumer-offsets: groups.")
@click.option(
    "--group-topics", type=_POSITIVE, default=3, show_default=True, help="consumer-offsets: topics per group."
)
@click.option(
    "--group-partitions",
    type=_POSITIVE,
    default=4,
    show_default=True,
    help="consumer-offsets: partitions per consumed topic.",
)
@click.option(
    "--commits",
    type=_POSITIVE,
    default=5,
    show_default=True,
    help="consumer-offsets: commit rounds per group.",
)
@click.option(
    "--expired-groups",
    type=_FRACTION,
    default=0.0,
    show_default=True,
    help="consumer-offsets: share of groups whose offsets and metadata end in tombstones.",
)
@click.option(
    "--transactional-ids",
    type=_POSITIVE,
    default=10,
    show_default=True,
    help="transaction-state: transactional ids.",
)
@click.option(
    "--transactions",
    type=_POSITIVE,
    default=5,
    show_default=True,
    help="transaction-state: transactions per transactional id.",
)
@click.option(
    "--expired-ids",
    type=_FRACTION,
    default=0.0,
    show_default=True,
    help="transaction-state: share of transactional ids that end in a tombstone (expired).",
)
@click.option(
    "--metadata-log",
    is_flag=True,
    help="Also write a KRaft metadata log (__cluster_metadata-0) with the topics, their partitions on this "
    "node and their configs, instead of storing the configs as logcleaner's overrides.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
def gen_command(workload: str, as_json: bool, **options: Any) -> int:
    """Write a synthetic workload into a log dir (through the storage layer), for demos and benchmarks.

    Existing partitions are appended to. The timestamps of records spread evenly over
    [--timestamp-start, --timestamp-start + --timestamp-spread]; --future-share of the batches are
    instead stamped now + --future-ms, a producer clock running ahead.

    --workload consumer-offsets writes __consumer_offsets (--partitions of it) as a group coordinator
    does: per group, its metadata, --commits rounds of offset commits for --group-topics x
    --group-partitions partitions, its metadata again, and for --expired-groups of them tombstones;
    timestamps spread as above, --segment-bytes defaults to 104857600 there.

    --workload transaction-state writes __transaction_state (--partitions of it) as a transaction
    coordinator does: per transactional id, its InitProducerId, then per transaction (--transactions of
    them) Ongoing, PrepareCommit and CompleteCommit (or the Abort ones, for --aborted-transactions of
    them), and for --expired-ids of the ids a tombstone; timestamps and --segment-bytes as above.
    """
    if workload != "records":
        _check_coordinator_options(workload, options)
    _refuse_other_workloads_options(workload)
    _print_results(_WORKLOADS[workload](options), as_json=as_json)
    return 0


def _records(options: dict[str, Any]) -> list[GenResult]:
    """--workload records: producers' records into topics of the user's."""
    return generate(
        GenOptions(
            log_dir=options["log_dir"],
            topics=_topic_names(options["topic_count"], options["topic_names"]),
            partitions=options["partitions"],
            records=options["records"],
            batch_size=options["batch_size"],
            keys=options["keys"],
            value_size=options["value_size"],
            tombstones=options["tombstones"],
            timestamp_start_ms=options["timestamp_start"],
            timestamp_spread_ms=options["timestamp_spread"],
            future_share=options["future_share"],
            future_ms=options["future_ms"],
            compression=compression_from_name(options["compression"]),
            segment_bytes=options["segment_bytes"],
            cleanup_policy=CLEANUP_POLICIES[options["cleanup_policy"]],
            seed=options["seed"],
            idempotent=options["idempotent"],
            transaction_batches=options["transaction_batches"],
            aborted_share=options["aborted_share"],
            metadata_log=options["metadata_log"],
        )
    )


def _transaction_state(options: dict[str, Any]) -> list[GenResult]:
    """--workload transaction-state: a transaction coordinator's __transaction_state."""
    return generate_transaction_state(
        TransactionStateWorkload(
            log_dir=options["log_dir"],
            partitions=options["partitions"],
            transactional_ids=options["transactional_ids"],
            transactions=options["transactions"],
            aborted_transactions=options["aborted_share"],
            expired_ids=options["expired_ids"],
            timestamp_start_ms=options["timestamp_start"],
            timestamp_spread_ms=options["timestamp_spread"],
            segment_bytes=_segment_bytes_or(options, TRANSACTION_STATE_SEGMENT_BYTES),
            seed=options["seed"],
        )
    )


def _consumer_offsets(options: dict[str, Any]) -> list[GenResult]:
    """--workload consumer-offsets: a group coordinator's __consumer_offsets."""
    return generate_consumer_offsets(
        OffsetsWorkload(
            log_dir=options["log_dir"],
            partitions=options["partitions"],
            groups=options["groups"],
            topics=options["group_topics"],
            topic_partitions=options["group_partitions"],
            commits=options["commits"],
            expired_groups=options["expired_groups"],
            timestamp_start_ms=options["timestamp_start"],
            timestamp_spread_ms=options["timestamp_spread"],
            segment_bytes=_segment_bytes_or(options, OFFSETS_SEGMENT_BYTES),
            seed=options["seed"],
        )
    )


_WORKLOADS: dict[str, Callable[[dict[str, Any]], list[GenResult]]] = {
    "records": _records,
    "consumer-offsets": _consumer_offsets,
    "transaction-state": _transaction_state,
}


def _segment_bytes_or(options: dict[str, Any], topic_default: int) -> int:
    """--segment-bytes if given, else the coordinator topic's own default (Kafka's
    ``offsets.topic.segment.bytes`` and ``transaction.state.log.segment.bytes``)."""
    segment_bytes: int = options["segment_bytes"]
    return topic_default if segment_bytes == _DEFAULT_CONFIG.segment_bytes else segment_bytes


def _topic_names(topic_count: int | None, topic_names: tuple[str, ...]) -> tuple[str, ...]:
    """The records workload's topics: those named, else gen-0, gen-1, ... (one if neither is given)."""
    if topic_count is not None and topic_names:
        raise click.BadParameter("give --topics N or --topic NAME..., not both", param_hint="--topics")
    return topic_names or tuple(f"gen-{i}" for i in range(topic_count or 1))


def _check_coordinator_options(workload: str, options: dict[str, Any]) -> None:
    """A coordinator's workload writes its own topic, with no producer id."""
    topic = "__consumer_offsets" if workload == "consumer-offsets" else "__transaction_state"
    if options["topic_count"] is not None or options["topic_names"]:
        raise click.BadParameter(f"--workload {workload} writes {topic} only", param_hint="--topic")
    if options["idempotent"] or options["transaction_batches"]:
        raise click.BadParameter(
            f"--workload {workload} writes as a coordinator does, with no producer id",
            param_hint="--transaction-batches" if options["transaction_batches"] else "--idempotent",
        )


# The options every workload reads, then those only some read: any other given is refused.
_SHARED_OPTIONS = frozenset(
    [
        "log_dir",
        "partitions",
        "timestamp_start",
        "timestamp_spread",
        "segment_bytes",
        "seed",
        "workload",
        "as_json",
    ]
)
_WORKLOAD_OPTIONS = {
    "records": frozenset(
        [
            "topic_count",
            "topic_names",
            "metadata_log",
            "records",
            "batch_size",
            "keys",
            "value_size",
            "tombstones",
            "future_share",
            "future_ms",
            "compression",
            "cleanup_policy",
            "idempotent",
            "transaction_batches",
            "aborted_share",
        ]
    ),
    "consumer-offsets": frozenset(
        ["groups", "group_topics", "group_partitions", "commits", "expired_groups"]
    ),
    "transaction-state": frozenset(["transactional_ids", "transactions", "expired_ids", "aborted_share"]),
}


def _refuse_other_workloads_options(workload: str) -> None:
    """An option given that the workload does not read is refused: ignored, it would leave the user
    believing the generated log has a shape it does not have."""
    ctx = click.get_current_context()
    for param in ctx.command.params:
        name = param.name or ""
        if name in _SHARED_OPTIONS or name in _WORKLOAD_OPTIONS[workload]:
            continue
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            readers = " or ".join(w for w, names in _WORKLOAD_OPTIONS.items() if name in names)
            raise click.BadParameter(
                f"--workload {workload} does not read it: it is for --workload {readers}",
                param_hint=f"'{param.opts[0]}'",
            )


def _print_results(results: list[GenResult], *, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"topics": [r.to_json() for r in results]}, indent=2))
    else:
        for r in results:
            click.echo(
                f"{r.topic}-{r.partition}: {r.records} records appended, log end offset {r.log_end_offset}, "
                f"{r.segments} segments, {r.size_bytes} bytes"
            )
