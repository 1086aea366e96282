"""Firing schedules: the due ones become turns, queued like any other.

The job engine runs `c2g.schedules` every few seconds, once per tick whatever the number of workers
(procrastinate's periodic tasks); `ScheduleFirer.fire` takes the schedules whose time has come, moves each
to its next time with a compare-and-set (`Store.advance_schedule`: of two processes, one fires it) and
queues its turn: a new session of the agent for each firing (RAGFlow's schedules, LangGraph's crons without
a thread), or the next turn of the cron's thread. A firing that was missed while no worker ran is made once,
not once per missed time.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from canvas2graph.runtime.run.runner import TurnRequest
from canvas2graph.server.backend.conversations import Conversations
from canvas2graph.server.backend.store import Store
from canvas2graph.server.backend.store_schedules import Schedule
from canvas2graph.server.backend.versions import dsl_for_new_session

log = logging.getLogger("canvas2graph.schedules")


class ScheduleError(ValueError):
    """A schedule that cannot be kept as given: names the field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def check_cron(expression: Any, tz: Any = None) -> tuple[str, str | None]:
    """The cron expression and time zone, checked (ScheduleError names the field)."""
    if not isinstance(expression, str) or not expression.strip():
        raise ScheduleError("schedule", "a cron expression is required, e.g. \"0 9 * * 1-5\" (9:00 on weekdays)")
    expression = " ".join(expression.split())
    if len(expression.split()) not in (5, 6) or not croniter.is_valid(expression):
        raise ScheduleError("schedule", f"{expression!r} is no cron expression: five fields (minute hour "
                                        "day-of-month month day-of-week), and an optional sixth for seconds")
    if tz is not None:
        if not isinstance(tz, str):
            raise ScheduleError("timezone", "must be an IANA time zone name, e.g. \"Europe/Paris\"")
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleError("timezone", f"{tz!r} is no IANA time zone name") from None
    return expression, tz


def next_fire(expression: str, tz: str | None, after: float) -> float:
    """The first time after `after` (epoch seconds) the expression names, in its time zone."""
    base = datetime.fromtimestamp(after, ZoneInfo(tz) if tz else timezone.utc)
    return croniter(expression, base).get_next(datetime).timestamp()


class ScheduleFirer:
    def __init__(self, store: Store, conversations: Conversations):
        self.store, self.conversations = store, conversations

    async def __call__(self, timestamp: int | None = None) -> int:
        """Fire the due schedules; returns how many this process fired."""
        now = time.time()
        fired = 0
        for schedule in await self.store.due_schedules(now):
            following = next_fire(schedule.schedule, schedule.timezone, now)
            if schedule.end_time is not None and following > schedule.end_time:
                following = None        # its last firing: the schedule ends
            if not await self.store.advance_schedule(schedule.id, schedule.next_run_at, following, now):
                continue                # another process fired it
            fired += 1
            try:
                await self._fire(schedule)
            except Exception as e:      # noqa: BLE001 - the schedule says why; the next firing tries again
                log.warning("schedule %s of agent %s could not start its run: %s", schedule.id, schedule.agent_id, e)
                await self.store.update_schedule(schedule.tenant, schedule.id, last_error=f"{type(e).__name__}: {e}")
        return fired

    async def _fire(self, schedule: Schedule) -> None:
        agent = await self.store.get_agent(schedule.tenant, schedule.agent_id)
        if agent is None:
            await self.store.update_schedule(schedule.tenant, schedule.id, enabled=False,
                                             last_error=f"agent {schedule.agent_id} was deleted")
            return
        session = await self.store.get_session(schedule.tenant, schedule.thread_id) if schedule.thread_id else None
        if session is None:
            dsl, version = await dsl_for_new_session(self.store, agent)
            session = await self.store.create_session(
                schedule.tenant, source="schedule", dsl=dsl, agent_id=agent.id, user_id=schedule.tenant,
                name=f"Schedule {schedule.schedule}", version=version, session_id=schedule.thread_id)
        request, options = self._request(schedule)
        turn = await self.conversations.submit(session, request, source="schedule", options=options, strategy="enqueue")
        await self.store.update_schedule(schedule.tenant, schedule.id, last_turn_id=turn.id,
                                         last_session_id=session.id, last_error=None)
        log.info("schedule %s fired: turn %s of session %s", schedule.id, turn.id, session.id)

    @staticmethod
    def _request(schedule: Schedule) -> tuple[TurnRequest, dict]:
        """The turn a firing asks for: `payload["request"]` holds the request's fields (query, inputs, files,
        user_id), read from the schedule's body when it was made; LangGraph's crons keep their run's options."""
        fields = dict(schedule.payload.get("request") or {})
        fields.setdefault("user_id", schedule.tenant)
        options: dict[str, Any] = {"schedule_id": schedule.id, "metadata": {**schedule.metadata, "cron_id": schedule.id}}
        if schedule.kind == "langgraph":
            options.update(assistant_id=schedule.agent_id, stream_mode=["values"],
                           multitask_strategy=schedule.payload.get("multitask_strategy") or "enqueue",
                           on_run_completed=schedule.on_run_completed)
        return TurnRequest(**fields), options
