"""``logcleaner explain``'s text: the explain document for people. Dates are UTC ISO 8601 and durations
``1d 0h``; the exact figures (ms since the epoch, ms) stay in ``--json``. Where a verdict has a standard
remedy, the line says it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from service.base.wording import human_duration, utc_date

__all__ = ["explanation_lines"]

Doc = Mapping[str, object]


def explanation_lines(doc: Doc, now_ms: int) -> list[str]:
    """One partition's lines: a header, one line per segment, the cleaner's view; ``now_ms`` is when the
    explanation was made (ages are counted from it)."""
    if doc.get("stray"):
        return [
            f"{doc['topic']}-{doc['partition']} ({doc['path']}): STRAY REPLICA, {doc['size_bytes']} bytes, "
            f"never retained, cleaned or deleted: {doc['reason']}"
        ]
    retention_ms = _int(doc["retention_ms"])
    sources = doc.get("config_sources")
    source_of = sources if isinstance(sources, Mapping) else {}
    lines = [
        f"{doc['topic']}-{doc['partition']} ({doc['log_dir']}): offsets [{doc['log_start_offset']}, "
        f"{doc['log_end_offset']}), high watermark {doc['high_watermark']} "
        f"({doc['high_watermark_source']}), {doc['size_bytes']} bytes, "
        f"cleanup.policy={doc['cleanup_policy']}{_from(source_of, 'cleanup.policy')}, "
        f"retention.ms={retention_ms}{_in_words(retention_ms)}{_from(source_of, 'retention.ms')}, "
        f"retention.bytes={doc['retention_bytes']}{_from(source_of, 'retention.bytes')}"
    ]
    segments = _docs(doc["segments"])
    for seg in segments:
        why = str(seg["detail"])  # the document's own sentence, as the REST API gives it
        lines.append(
            f"  segment {seg['base_offset']:>20}  {seg['size_bytes']:>12} B  "
            f"largest ts {utc_date(_int(seg['largest_timestamp']))} ({seg['largest_timestamp_source']})  "
            f"{str(seg['verdict']).upper():6} {seg['reason']}{' — ' + why if why else ''}"
        )
    lines.append(_cleaner_line(doc))
    return lines


def _cleaner_line(doc: Doc) -> str:
    cleaner = doc["cleaner"]
    if not isinstance(cleaner, Mapping):
        raise TypeError(f"the explain document's cleaner is not an object: {cleaner!r}")
    reason = cleaner["reason"]
    line = (
        f"  cleaner: dirty ratio {cleaner['dirty_ratio']:.3f} (min {cleaner['min_cleanable_dirty_ratio']}), "
        f"dirty from {cleaner['first_dirty_offset']} to {cleaner['first_uncleanable_offset']} "
        f"({cleaner['first_uncleanable_reason']}): "
        f"{'would clean' if cleaner['would_clean'] else 'would not clean'} ({reason})"
        f", on {cleaner['engine']} ({cleaner['engine_reason']}{_estimates(cleaner.get('engine_estimates'))})"
    )
    if reason == "dirty-ratio-at-or-below-min-cleanable-ratio":
        line += (
            f". Remedy: logcleaner clean --topic {doc['topic']} --partition {doc['partition']} cleans it "
            "now, whatever its ratio"
        )
    elif reason == "cleaner-disabled":
        line += ". Remedy: log.cleaner.enable=true"
    return line


def _estimates(estimates: object) -> str:
    """``: 12.3 s on the cluster, 40.1 s in-process`` where ``auto`` compared them."""
    if not isinstance(estimates, Mapping):
        return ""
    return f": {estimates['spark_s']:.1f} s on the cluster, {estimates['in_process_s']:.1f} s in-process"


def _from(source_of: Mapping[object, object], name: str) -> str:
    """Where a config value came from (``override``, ``metadata``, ``broker`` …), when the document says."""
    source = source_of.get(name)
    return f" [{source}]" if source else ""


def _in_words(duration_ms: int) -> str:
    return f" ({human_duration(duration_ms)})" if duration_ms >= 0 else " (unlimited)"


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"the explain document has {value!r} where it has an integer")
    return value


def _docs(value: object) -> Sequence[Doc]:
    if not isinstance(value, list):
        raise TypeError(f"the explain document has {value!r} where it has a list")
    return value
