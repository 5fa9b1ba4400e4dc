"""``tasks``: one-shot delayed tasks without a live scheduler. ``ManualTaskScheduler`` is Kafka's
``MockScheduler`` (a task runs at the first ``tick`` once the manual clock reaches its due time, due tasks
in due order, ties in the order scheduled); ``DeferredTasks`` runs everything, in order, when told."""

from __future__ import annotations

from service.base.clock import ManualClock
from service.core.tasks import DeferredTasks, ManualTaskScheduler


def test_a_task_runs_once_its_due_time_is_reached() -> None:
    scheduler = ManualTaskScheduler(ManualClock(0))
    ran: list[str] = []
    scheduler.schedule_once("delete-file", 60_000, lambda: ran.append("delete"))
    assert scheduler.advance(59_999) == 0 and ran == []
    assert scheduler.pending == 1
    assert scheduler.advance(1) == 1 and ran == ["delete"]
    assert scheduler.pending == 0
    assert scheduler.advance(10**9) == 0 and ran == ["delete"], "once"


def test_due_tasks_run_in_due_order_and_ties_in_scheduling_order() -> None:
    clock = ManualClock(0)
    scheduler = ManualTaskScheduler(clock)
    ran: list[str] = []
    scheduler.schedule_once("c", 300, lambda: ran.append("c"))
    scheduler.schedule_once("a", 100, lambda: ran.append("a"))
    scheduler.schedule_once("b1", 200, lambda: ran.append("b1"))
    scheduler.schedule_once("b2", 200, lambda: ran.append("b2"))
    clock.advance(250)
    assert scheduler.tick() == 3
    assert ran == ["a", "b1", "b2"]


def test_a_negative_delay_is_due_now() -> None:
    scheduler = ManualTaskScheduler(ManualClock(1000))
    ran: list[int] = []
    scheduler.schedule_once("late", -500, lambda: ran.append(1))
    assert scheduler.tick() == 1 and ran == [1]


def test_a_task_scheduled_by_a_task_runs_in_the_same_tick_when_due() -> None:
    """As Kafka's ``MockScheduler.tick``: it runs while the head of the queue is due."""
    scheduler = ManualTaskScheduler(ManualClock(0))
    ran: list[str] = []

    def first() -> None:
        ran.append("first")
        scheduler.schedule_once("now", 0, lambda: ran.append("now"))
        scheduler.schedule_once("later", 10, lambda: ran.append("later"))

    scheduler.schedule_once("first", 0, first)
    assert scheduler.tick() == 2 and ran == ["first", "now"]
    assert scheduler.advance(10) == 1 and ran[-1] == "later"


def test_deferred_tasks_run_all_in_order_whatever_their_delay() -> None:
    tasks = DeferredTasks()
    ran: list[str] = []
    tasks.schedule_once("b", 60_000, lambda: ran.append("b"))
    tasks.schedule_once("a", 0, lambda: ran.append("a"))
    assert tasks.run_all() == 2 and ran == ["b", "a"]
    assert tasks.run_all() == 0 and ran == ["b", "a"], "each runs once"


def test_a_task_deferred_by_a_deferred_task_waits_for_the_next_run_all() -> None:
    tasks = DeferredTasks()
    ran: list[str] = []
    tasks.schedule_once("outer", 0, lambda: tasks.schedule_once("inner", 0, lambda: ran.append("inner")))
    assert tasks.run_all() == 1 and ran == []
    assert tasks.run_all() == 1 and ran == ["inner"]
