"""``/metrics``: content negotiation, per-partition lines written directly, and one scrape at a time.

- The format follows the scraper's ``Accept`` header (prometheus_client's ``choose_encoder``): OpenMetrics
  when it asks for ``application/openmetrics-text``, as Prometheus does by default; the text format
  otherwise.
- A ``TextCollector`` (the per-partition gauges: four to six samples for each of up to 100,000 partitions)
  writes its own lines instead of building prometheus_client's ``Sample`` objects: a gauge's lines are the
  same in both formats, so they are spliced into the encoded rest (before OpenMetrics' ``# EOF``). As a
  registered ``Collector`` it still serves ``collect()``, with the same samples, for any other reader.
- One scrape at a time (``ScrapeCoalescer``): a scrape that arrives while another renders the same format
  waits for that one and answers its result, so scrapers that pile up (a slow scrape, two Prometheus
  servers) never multiply the work; different formats render one after the other.
"""

from __future__ import annotations

import abc
import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

__all__ = ["ExpositionRegistry", "ScrapeCoalescer", "TextCollector", "expose", "gauge_header"]

_EOF = b"# EOF\n"
_OPENMETRICS = "application/openmetrics-text"


class TextCollector(Collector, abc.ABC):
    """A collector of gauge families that can also write its exposition lines itself."""

    @abc.abstractmethod
    def write_text(self, out: io.StringIO) -> None:
        """Every family's ``# HELP``/``# TYPE`` lines and samples, as ``collect()`` would give them."""


def gauge_header(name: str, documentation: str) -> str:
    """A gauge family's ``# HELP`` and ``# TYPE`` lines (help escaped as both formats want it)."""
    escaped = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {escaped}\n# TYPE {name} gauge\n"


@dataclass
class _Flight:
    done: threading.Event = field(default_factory=threading.Event)
    body: bytes = b""
    error: BaseException | None = None
    waiters: int = 0  # scrapes waiting for this one's result


class ScrapeCoalescer:
    """Renders one scrape at a time; a scrape of a format already rendering gets that rendering's result.

    ``_guard`` guards ``_flights`` (the rendering in progress per content type); ``_render_lock`` lets one
    rendering run at a time.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._render_lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}

    def render(self, content_type: str, render: Callable[[], bytes]) -> bytes:
        with self._guard:
            flight = self._flights.get(content_type)
            is_leader = flight is None
            if flight is None:
                flight = self._flights[content_type] = _Flight()
            else:
                flight.waiters += 1
        if is_leader:
            try:
                with self._render_lock:
                    flight.body = render()
            except BaseException as exc:
                flight.error = exc
                raise
            finally:
                with self._guard:
                    del self._flights[content_type]
                flight.done.set()
            return flight.body
        flight.done.wait()
        if flight.error is not None:
            raise RuntimeError("the scrape this one waited for failed") from flight.error
        return flight.body

    def waiting(self, content_type: str) -> int:
        """How many scrapes wait for the one rendering ``content_type`` now."""
        with self._guard:
            flight = self._flights.get(content_type)
            return 0 if flight is None else flight.waiters


class ExpositionRegistry(CollectorRegistry):
    """The daemon's registry: ``collect()`` as any registry gives every family; ``expose`` renders them for
    ``/metrics``, ``TextCollector``s through their own lines, one scrape at a time."""

    def __init__(self) -> None:
        super().__init__()
        self._encoded = CollectorRegistry()  # every collector but the TextCollectors
        self._text: list[TextCollector] = []
        self.coalescer = ScrapeCoalescer()

    def register(self, collector: Collector) -> None:
        super().register(collector)
        if isinstance(collector, TextCollector):
            self._text.append(collector)
        else:
            self._encoded.register(collector)

    def unregister(self, collector: Collector) -> None:
        super().unregister(collector)
        if isinstance(collector, TextCollector):
            self._text.remove(collector)
        else:
            self._encoded.unregister(collector)

    def expose(self, accept: str | None) -> tuple[bytes, str]:
        """The body and its content type for a scrape that sent ``accept``."""
        encode, content_type = choose_encoder(accept or "")

        def render() -> bytes:
            head: bytes = encode(self._encoded)
            out = io.StringIO()
            for collector in list(self._text):
                collector.write_text(out)
            lines = out.getvalue().encode()
            if content_type.startswith(_OPENMETRICS) and head.endswith(_EOF):
                return head[: -len(_EOF)] + lines + _EOF
            return head + lines

        return self.coalescer.render(content_type, render), content_type


def expose(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """``registry``'s exposition in the format ``accept`` asks for, and its content type."""
    if isinstance(registry, ExpositionRegistry):
        return registry.expose(accept)
    encode, content_type = choose_encoder(accept or "")
    body: bytes = encode(registry)
    return body, content_type
