"""``round``: the cleaning round as the workers run it, on the in-process engine over real logs. A round
cleans the candidate's [first dirty, first uncleanable) and reports it as a ``RoundOutcome`` (offsets,
bytes, engine, stats); the files it replaced are deleted by the scheduler's ``delete-file`` tasks
``file.delete.delay.ms`` later, not in the round; several candidates at once each report to ``on_done``,
an aborted one with its error while the others finish. (The worker loop around it is ``test_worker.py``'s.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from cleaner.engine import InProcessEngine
from cleaner.pool.manager import Candidate
from cleaner.pool.round import engine_round, engine_rounds
from cleaner.pool.worker import RoundOutcome
from service.base.clock import ManualClock
from service.base.errors import LogCleanerError
from service.core.cleanable import log_to_clean
from service.core.tasks import ManualTaskScheduler
from service.storage.log import PartitionLog
from tests.cleaner.helpers import all_batches, new_log, write_keys

NOW_MS = 1_700_000_000_000


class Aborted(LogCleanerError):
    """What a round's abort check raises (as the pool's does when the log is deleted or the pool stops)."""


def candidate(log: PartitionLog) -> Candidate:
    return Candidate(log, log_to_clean(log, None, NOW_MS))


def files(log: PartitionLog) -> set[str]:
    return {p.name for p in log.directory.iterdir()}


def never_aborted() -> None:
    return None


def test_a_round_cleans_the_cleanable_range_and_reports_it(tmp_path: Path) -> None:
    clock = ManualClock(NOW_MS)
    scheduler = ManualTaskScheduler(clock)
    log = new_log(tmp_path / "profiles-0", clock)
    write_keys(log, range(20), rounds=3)
    chosen = candidate(log)
    upper = chosen.to_clean.first_uncleanable_offset
    clean = engine_round(InProcessEngine(clock), throttle=lambda _bytes: None, scheduler=scheduler)

    outcome = clean(chosen, never_aborted, 0)

    assert (outcome.topic, outcome.partition, outcome.first_dirty_offset) == ("profiles", 0, 0)
    assert outcome.end_offset == upper and outcome.engine == "in-process"
    assert outcome.bytes_read > outcome.bytes_written > 0 and not outcome.spilled
    assert outcome.stats["engine"] == "in-process"
    below = [r.key or b"" for b in all_batches(log) if b.last_offset < upper for r in b.records()]
    assert sorted(below) == sorted(b"k%d" % k for k in range(20))  # each key once: its older values gone
    assert any(name.endswith(".deleted") for name in files(log))  # replaced, not yet deleted
    assert scheduler.pending > 0
    scheduler.advance(log.config.file_delete_delay_ms)
    assert not any(name.endswith(".deleted") for name in files(log))


def test_several_candidates_each_report_and_an_aborted_one_does_not_stop_the_others(tmp_path: Path) -> None:
    clock = ManualClock(NOW_MS)
    logs = [new_log(tmp_path / f"profiles-{p}", clock) for p in range(3)]
    for log in logs:
        write_keys(log, range(10), rounds=8)
    done: dict[int, RoundOutcome | BaseException] = {}

    def abort() -> None:
        raise Aborted("profiles-1 was deleted")

    clean_many = engine_rounds(
        InProcessEngine(clock), throttle=lambda _bytes: None, scheduler=ManualTaskScheduler(clock)
    )
    clean_many([candidate(log) for log in logs], [never_aborted, abort, never_aborted], 0, done.__setitem__)

    assert sorted(done) == [0, 1, 2]
    assert isinstance(done[1], Aborted)
    for i in (0, 2):
        outcome = done[i]
        assert isinstance(outcome, RoundOutcome) and outcome.partition == i and outcome.end_offset > 0


@pytest.mark.parametrize("worker_id", [-1, 3])
def test_the_round_runs_on_the_workers_thread_slot(tmp_path: Path, worker_id: int) -> None:
    clock = ManualClock(NOW_MS)
    log = new_log(tmp_path / "profiles-0", clock)
    write_keys(log, range(10), rounds=8)
    chosen = candidate(log)
    clean = engine_round(
        InProcessEngine(clock), throttle=lambda _bytes: None, scheduler=ManualTaskScheduler(clock)
    )

    assert clean(chosen, never_aborted, worker_id).end_offset == chosen.to_clean.first_uncleanable_offset > 0
