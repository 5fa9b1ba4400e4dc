"""The long-running service: start-up, the stop, and the topic-config refresh, over the parts that
``service.shell.node`` (the composition root) builds; the daemon constructs none of them.

What it runs: ``build_node``'s node (the metadata log, the scheduler, the LogManager and its cleaning port,
the metrics), ``build_api_server``'s API, and once the logs loaded ``build_cleaner_parts``' engine and
cleaner workers and ``schedule_log_tasks``' periodic tasks. It hands the node only its callbacks: where
its cleaner is, its topic-config refresh, and why it is not ready.

Start-up: the broker's metadata log is read when the daemon is built (``service.metadata``; unreadable:
exit 2 before anything binds), then the REST API binds its port (``/healthz`` and ``/metrics`` answer from
then on, ``/readyz`` and ``/v1`` answer 503 with the loading progress), then topic overrides are read,
every log dir is locked and loaded (the LogManager), then the cleaner and the periodic tasks are built, and
Kafka's periodic log tasks start after ``scheduler.initial.delay.ms``. A start-up that fails stops what it
started before anything acted, without the clean-shutdown marker.
SIGTERM/SIGINT: cleaner rounds and retention passes in flight are told to end at once, the API stops, then
the cleaner (its aborted rounds named in the log), then the scheduler (runs in flight finish), every log is
flushed and closed, both checkpoints and the clean-shutdown marker are written, and the process exits 0;
all within ``shutdown.timeout.ms``, else it exits 1 without the marker. A second signal exits at once. A
signal while the logs load ends the loading at the next partition: start-up fails (exit 1, no marker).

With ``log.cleaner.enable``, ``log.cleaner.threads`` cleaner workers (``kafka-log-cleaner-thread-N``)
compact the dirtiest logs on the chosen engine and run the retention of compacted logs; they stop before
the logs are closed. Topic overrides changed by another process, and configs changed in the metadata log,
are picked up within a second (``logcleaner-topic-config-refresh`` every
``service.shell.node.TOPIC_CONFIG_REFRESH_MS``, calling ``refresh_topic_configs``) and at each retention run.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import NoReturn

from api.server import ApiServer  # the API and the cleaner: imported while serve's early prescans run
from cleaner.engine import CompactionEngine
from cleaner.pool.log_cleaner import LogCleaner
from service.base.clock import Clock, SystemClock
from service.base.errors import ConflictError, LogCleanerError
from service.config.broker_config import BrokerConfig
from service.config.listen_policy import check_listen_policy
from service.core.ports import CleanerView
from service.core.stray_replicas import ReplicaDir, stray_reason
from service.core.version import package_version
from service.metadata.image import MetadataImage
from service.shell.node import (
    build_api_server,
    build_cleaner_parts,
    build_node,
    schedule_log_tasks,
)
from service.shell.sd_notify import sd_notify
from service.shell.signal_relay import SignalRelay
from service.storage.log_dir import LoadInterruptedError
from service.storage.prescan import EarlyPrescans
from service.storage.topic_partition import TopicPartition

__all__ = ["Daemon", "StartupError"]

logger = logging.getLogger(__name__)


class StartupError(LogCleanerError):
    """Start-up could not complete (the port is taken, a log dir is locked): ``serve`` exits 1."""


class Daemon:
    """Runs the node ``service.shell.node`` builds (its scheduler, LogManager, metrics, API and cleaner):
    starts them in order and stops them; owns the stop event (``_stop``, the only cross-thread state)."""

    def __init__(
        self,
        broker: BrokerConfig,
        *,
        clock: Clock | None = None,
        prescans: EarlyPrescans | None = None,
    ) -> None:
        """``prescans``: log dirs ``serve`` locked and began to scan before importing this module
        (``start_early_prescans``); the LogManager takes them over at start-up."""
        self.broker = broker
        self._prescans = prescans
        self.clock = clock or SystemClock()
        # The API and the metrics see the node's parts (node.view), not this daemon.
        self.node = build_node(
            broker, self.clock, cleaner=lambda: self.cleaner, refresh_topic_configs=self.refresh_topic_configs
        )
        self.topic_store = self.node.topic_store
        self.metadata = self.node.metadata
        self.scheduler = self.node.scheduler
        self.log_manager = self.node.log_manager
        self.view = self.node.view
        self.metrics = self.node.metrics
        self.metrics_registry = self.metrics.registry
        self._stop = threading.Event()
        self._refresh_lock = threading.Lock()  # one topic-config refresh at a time
        self._config_version: tuple[int, object] = (0, None)
        self._warned_strays: set[TopicPartition] = set()  # live logs the metadata no longer gives us
        self._metadata_error: str | None = None  # the last metadata read's error, logged once
        self.engine: CompactionEngine | None = None
        self.cleaner: LogCleaner | None = None
        self.api_server: ApiServer | None = None
        self._ready = False  # every log loaded and every task started
        self._stopping = False
        self._stop_began: float | None = None  # monotonic time of the first stop signal
        self._watchdog: threading.Timer | None = None  # ends a stop that overruns shutdown.timeout.ms
        self._signals: SignalRelay | None = None  # hands SIGTERM and SIGINT to request_stop

    def start(self) -> None:
        """Bind the API, then lock and load the logs, then start the tasks; a failure stops what started.

        The port is bound before anything touches the log dirs, so a taken port (or a bad ``api.*``
        setting) fails start-up with nothing changed on disk. No scheduled task or cleaner thread starts
        until every start-up condition held; ``/readyz`` and ``/v1`` answer 503 until then. Listening
        beyond loopback without a token (``check_listen_policy``) is refused before anything binds.
        """
        check_listen_policy(self.broker)
        server = build_api_server(self.node, not_ready=self.not_ready_reason)
        try:
            server.start()
        except (OSError, RuntimeError) as exc:
            raise StartupError(str(exc)) from exc
        self.api_server = server
        sd_notify("READY=1")  # systemd: the API listens (it reports the loading progress from here on)
        if self.broker.source_of("log.dirs") == "default":  # a surprise otherwise: it follows the cwd
            logger.info(
                "log.dirs and log.dir are not set: using the embedded default %s, here %s",
                ",".join(self.broker.log_dirs),
                ", ".join(str(path.absolute()) for path in self.log_manager.log_dirs),
            )
        try:
            for path in self.log_manager.log_dirs:
                if not path.is_dir():  # as a broker does; the offline commands never create one
                    path.mkdir(parents=True, exist_ok=True)
                    logger.info("Created the missing log dir %s", path)
            self.topic_store.load()
            self._config_version = (self.topic_store.version, self.metadata.dynamic_configs)
            try:
                if self._stop.is_set():
                    raise LoadInterruptedError("a stop was requested before the logs loaded")
                self.log_manager.startup(stop=self._stop, prescans=self._prescans)
            except ConflictError as exc:
                raise StartupError(str(exc)) from exc
            except LoadInterruptedError as exc:
                progress = self.log_manager.load_progress.describe()
                raise StartupError(
                    f"start-up interrupted by a stop signal ({progress}): exiting without the "
                    "clean-shutdown marker; the next start recovers the logs"
                ) from exc
            if self._stop.is_set():  # every log loaded: the stop that follows closes them cleanly
                logger.info("Stop requested during start-up: the tasks and the cleaner do not start")
                return
            self._start_services()
        except BaseException:
            logger.debug("Start-up failed: stopping what was started before it acted")  # main() says why
            self._abort_start()
            raise
        self._ready = True
        logger.info(self._started_line())

    def _start_services(self) -> None:
        parts = build_cleaner_parts(self.node)  # with log.cleaner.enable, over the loaded logs
        if parts is not None:
            self.engine, self.cleaner = parts.engine, parts.cleaner
        schedule_log_tasks(self.node)
        self.scheduler.start()  # last but the cleaner: nothing above acts on the logs
        if self.cleaner is not None:
            self.cleaner.start()

    def _abort_start(self) -> None:
        """Stop what a failed start began, without the clean-shutdown marker (the next start recovers)."""
        self._stop.set()
        if self.api_server is not None:
            self.api_server.stop()
        if self.cleaner is not None:
            self.cleaner.shutdown(timeout_s=self._timeout_s)
        self.scheduler.shutdown(wait=True, timeout_s=self._timeout_s)
        if self.engine is not None:
            self.engine.close()
        self.metrics.close()
        self.log_manager.release_locks()

    def _started_line(self) -> str:
        manager = self.log_manager
        unclean = [state.path for state in manager.online_dirs() if not state.had_clean_shutdown]
        recovered = sum(len(manager.logs_in(path)) for path in unclean)
        url = self.api_server.url if self.api_server is not None else "-"
        dirs = ", ".join(str(p) for p in manager.log_dirs)
        auth = "on" if self.broker.api_auth_token_file else "off"
        return (
            f"logcleaner started (version {package_version()}): {len(manager.logs)} logs loaded "
            f"({recovered} recovered) from {dirs}; REST API on {url} (auth {auth})"
        )

    def refresh_topic_configs(self) -> None:
        """Pick up topic overrides changed by another process (``logcleaner topic-config``) or the API, and
        configs changed in the broker's metadata log (a new snapshot or batches). One refresh at a time (the
        scheduled one and an API call's): each change is applied, and audited, once."""
        with self._refresh_lock:
            self._refresh_topic_configs()

    def _refresh_topic_configs(self) -> None:
        self.topic_store.load_if_changed()
        self._refresh_metadata()
        version = (self.topic_store.version, self.metadata.dynamic_configs)
        if version != self._config_version:
            self._config_version = version
            self.log_manager.apply_topic_configs()
            logger.info(
                "Topic configs changed (overrides version %d): applied to the live logs (each change is on "
                "the logcleaner.audit trail)",
                version[0],
            )

    def _refresh_metadata(self) -> None:
        """Re-read the metadata log if its files changed; an unreadable one keeps the last image read (a
        broker writing it may be mid-way through a snapshot), logged once per distinct error."""
        before = self.metadata.image
        try:
            changed = self.metadata.load_if_changed()
        except (LogCleanerError, OSError) as exc:
            if str(exc) != self._metadata_error:
                logger.error("Cannot re-read the metadata log; the configs read before stay: %s", exc)
            self._metadata_error = str(exc)
            return
        self._metadata_error = None
        if changed and _topics_changed(before, self.metadata.image):  # a config change alone: no pass
            self._warn_of_new_strays()

    def _warn_of_new_strays(self) -> None:
        """Live logs the re-read metadata no longer gives this broker (a topic deleted, a partition moved
        away): one warning each. They stay loaded until the next start, which holds them as stray replicas
        (Kafka's broker would delete or move them; logcleaner never deletes on the metadata's word)."""
        known = self.metadata.known_topics()
        if known is None:
            return
        for tp, log in sorted(self.log_manager.logs.items()):
            replica = ReplicaDir(tp, log.log_dir, log.directory.name, "", log.topic_id)
            reason = stray_reason(replica, known)
            if reason is not None and tp not in self._warned_strays:
                logger.warning(
                    "%s in %s: %s; it stays loaded until the next start, which holds it as a stray replica",
                    tp,
                    log.directory,
                    reason,
                )
                self._warned_strays.add(tp)

    @property
    def cleaner_view(self) -> CleanerView | None:
        """The log cleaner as the API and the metrics see it (None with ``log.cleaner.enable=false``)."""
        return self.cleaner

    @property
    def _timeout_s(self) -> float:
        return self.broker.shutdown_timeout_ms / 1000

    def not_ready_reason(self) -> str | None:
        """Why ``/readyz`` and ``/v1`` answer 503 now (loading progress, stopping), or None when ready."""
        if self._stopping:
            return "stopping"
        if not self._ready:
            return self.log_manager.load_progress.describe()
        return None

    def request_stop(self, signum: int | None = None) -> None:
        """The first SIGTERM/SIGINT stops cleanly; a second exits at once, without the marker.

        A signal while the logs load ends the loading at the next partition (start-up then fails, exit 1,
        no marker), bounded by ``shutdown.timeout.ms`` from the signal like any stop."""
        if signum is not None and self._stop.is_set():
            logger.error("Received signal %d again: exiting now, without the clean-shutdown marker", signum)
            _exit_now()
        if signum is not None:
            logger.info("Received signal %d: shutting down", signum)
            self._stop_began = time.monotonic()
            self._stopping = True  # /readyz answers 503 from here on
            if not self._ready:
                self._arm_watchdog(self._timeout_s)
        self._stop.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT request the stop; installed before start-up, so a stop may interrupt it.
        ``request_stop`` runs on the relay's thread (``signal_relay``: a handler must take no lock)."""
        if self._signals is None:
            self._signals = SignalRelay(self.request_stop)
        self._signals.install(signal.SIGTERM, signal.SIGINT)

    def run_until_stopped(self) -> None:
        self.install_signal_handlers()
        while not self._stop.wait(timeout=1.0):
            pass

    def _arm_watchdog(self, after_s: float) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = threading.Timer(max(after_s, 0), lambda: self._abandon_stop(self._still_running()))
        self._watchdog.daemon = True
        self._watchdog.start()

    def shutdown(self) -> None:
        """Stop within ``shutdown.timeout.ms``: API, cleaner, scheduler, then close the logs (the marker).

        Each phase is logged with its duration. Past the bound the stop is abandoned: what still runs is
        logged and the process exits 1 without the clean-shutdown marker, so the next start recovers.
        """
        self._stopping = True  # /readyz answers 503 from here on
        self._stop.set()
        sd_notify("STOPPING=1")
        began = self._stop_began if self._stop_began is not None else time.monotonic()
        deadline = began + self._timeout_s
        self._arm_watchdog(deadline - time.monotonic())
        phase = _Phases()
        self.log_manager.begin_stop()  # a retention pass ends after its current log
        if self.cleaner is not None:
            self.cleaner.begin_stop()  # rounds abort at their next check while the API stops
        if self.api_server is not None:
            self.api_server.stop()  # first: no request reaches a closing log
        phase.done("API stopped")
        if self.cleaner is not None:
            aborted = self.cleaner.shutdown(timeout_s=max(deadline - time.monotonic(), 0))
            still = [w.thread.name for w in self.cleaner.workers if w.thread.is_alive()]
            if still:
                self._abandon_stop(", ".join(still))
            phase.done(f"cleaner stopped{_aborted_rounds(aborted)}")
        running = self.scheduler.shutdown(wait=True, timeout_s=max(deadline - time.monotonic(), 0))
        if running:
            self._abandon_stop(", ".join(f"scheduled task {name}" for name in running))
        phase.done("scheduler stopped")
        if self.engine is not None:
            self.engine.close()
            phase.done("engine closed")
        self.metrics.close()  # no scrape reads the logs once they close
        self.log_manager.shutdown()
        if self._watchdog is not None:
            self._watchdog.cancel()
        phase.done("logs closed")
        logger.info("Shut down cleanly in %.1f s", time.monotonic() - began)

    def _still_running(self) -> str:
        if not self.log_manager.is_loaded:
            return self.log_manager.load_progress.describe()
        running = [f"scheduled task {name}" for name in self.scheduler.running()]
        if self.cleaner is not None:
            running += [w.thread.name for w in self.cleaner.workers if w.thread.is_alive()]
        return ", ".join(running) or "closing the logs"

    def _abandon_stop(self, still_running: str) -> None:
        logger.error(
            "Stop abandoned after shutdown.timeout.ms=%d: still running: %s; exiting without the "
            "clean-shutdown marker (the next start recovers)",
            self.broker.shutdown_timeout_ms,
            still_running,
        )
        _exit_now()


class _Phases:
    """Logs each phase of the stop with how long it took."""

    def __init__(self) -> None:
        self._last = time.monotonic()

    def done(self, what: str) -> None:
        now = time.monotonic()
        logger.info("%s in %.1f s", what, now - self._last)
        self._last = now


def _aborted_rounds(partitions: list[TopicPartition]) -> str:
    """`` (aborted round on t-3)``, `` (aborted rounds on t-0, t-3)``, or nothing."""
    if not partitions:
        return ""
    noun = "round" if len(partitions) == 1 else "rounds"
    return f" (aborted {noun} on {', '.join(str(tp) for tp in partitions)})"


def _exit_now() -> NoReturn:
    """Exit 1 at once: threads stuck in a task would keep a normal exit waiting for them."""
    logging.shutdown()
    os._exit(1)


def _topics_changed(before: MetadataImage | None, after: MetadataImage | None) -> bool:
    """Whether ``after`` differs from ``before`` in what the stray check reads (topics, their ids and
    partitions, the deleted topics); an image read on shares the topics no record touched with the one
    before, so this is one identity test per topic."""
    if before is None or after is None:
        return before is not after
    if before.removed_topics != after.removed_topics or before.topics.keys() != after.topics.keys():
        return True
    return any(after.topics[name] is not topic for name, topic in before.topics.items())
