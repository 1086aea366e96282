"""A2A tasks kept in the server's database, so every `serve` process on it sees every task.

`a2a-sdk`'s request handler works on any `TaskStore`; for several processes it also takes a
`VersionedTaskStore` (each write names the version it read, and a stale write is refused) and a
`TaskEventStream` (how a process follows a task that another process runs). `SharedTaskStore` and
`SharedEventStream` implement them on the store's own tables (`server/backend/store_a2a.py`), on its
SQLite connection or PostgreSQL pool, instead of the SDK's SQLAlchemy stores, which would open a
second connection and bring SQLAlchemy and another driver (see docs/protocols.md).

A task is stored as protobuf bytes (`SerializeToString`: a hundred times cheaper than JSON both ways,
and the SDK's own event log stores events so), beside the columns lists filter by. Each task belongs
to a tenant and an agent (`Scope`); another tenant's task, or another agent's, is not found.

Every write logs the event that made it, so a process that did not run the task can stream it. Finished
or idle tasks are deleted after `TASK_TTL` and events after `EVENT_TTL`, by a sweep that a write starts
at most every `SWEEP_EVERY` seconds per process.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES
from a2a.server.cluster import (ConcurrentTaskModificationError, StoredTask, TaskEventStream, TaskVersion,
                                VersionedEvent, VersionedTaskStore)
from a2a.server.context import ServerCallContext
from a2a.types import (ListTasksRequest, ListTasksResponse, Message, StreamResponse, Task, TaskState,
                       TaskStatusUpdateEvent)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from a2a.utils.proto_utils import to_stream_response
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor
from google.protobuf.message import DecodeError

from canvas2graph.server.backend.store import A2ATaskRow, Store

TASK_TTL = 7 * 24 * 3600.0          # a task not written for this long is deleted (finished or not)
EVENT_TTL = 600.0                   # logged events serve streams that follow a running task: minutes suffice
SWEEP_EVERY = 60.0
POLL_SECONDS = 0.25                 # how often a stream of another process's task looks for new events
CHECK_SECONDS = 1.0                 # and, when there are none, how often it looks at the task itself
STALL_SECONDS = 60.0                # a followed task that no process runs ends its stream after this long
CANCEL_ATTEMPTS = 20

Scope = Callable[[ServerCallContext], tuple[str, str]]     # a call's (tenant, agent id)
StoreOf = Callable[[], Store]

log = logging.getLogger(__name__)


class RowVersion(TaskVersion):
    """A stored task's version: the row's counter, readable (the SDK's `TaskVersion` keeps its value private)."""

    __slots__ = ("number",)

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


def version_number(version: TaskVersion) -> int:
    """0 for `TaskVersion.MISSING` (never written), else the counter of a version this store gave out."""
    if version.is_missing:
        return 0
    if not isinstance(version, RowVersion):
        raise TypeError(f"{version!r} was not read from the shared task store")
    return version.number


def event_bytes(event: Any) -> bytes:
    return to_stream_response(event).SerializeToString()


def event_of(data: bytes) -> Any:
    """A logged event back as the SDK's event (a Task, Message, status or artifact update)."""
    response = StreamResponse.FromString(data)
    which = response.WhichOneof("payload")
    if which is None:
        raise DecodeError("a logged A2A event without a payload")
    return getattr(response, which)


class SharedTaskStore(VersionedTaskStore):
    """The SDK's tasks in the server's database, per tenant and agent, written by compare-and-set."""

    def __init__(self, store_of: StoreOf, scope: Scope, ttl: float = TASK_TTL):
        self.store_of, self.scope, self.ttl = store_of, scope, ttl
        self.next_sweep = 0.0
        self.sweeps: set[asyncio.Task] = set()

    def _row(self, task: Task, context: ServerCallContext, version: int) -> A2ATaskRow:
        tenant, agent_id = self.scope(context)
        stamp = task.status.timestamp.ToNanoseconds() if task.status.HasField("timestamp") else -1
        return A2ATaskRow(id=task.id, tenant=tenant, agent_id=agent_id, context_id=task.context_id,
                          state=TaskState.Name(task.status.state), status_ns=stamp, version=version,
                          task=task.SerializeToString(), updated_at=time.time())

    async def save(self, task: Task, *, event: Any = None, prev: Task | None = None,
                   prev_version: TaskVersion, context: ServerCallContext) -> TaskVersion:
        """Write `task` over `prev_version` (a first write when MISSING); a stale version raises
        `ConcurrentTaskModificationError`. A cancel overwrites any unfinished version, as the SDK asks."""
        store = self.store_of()
        logged = None if event is None else event_bytes(event)
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            number = await self._cancel(store, task, context, logged)
        else:
            number = version_number(prev_version) + 1
            row = self._row(task, context, number)
            if number > 1:
                written = await store.replace_a2a_task(row, number - 1, logged)
            elif written := await store.insert_a2a_task(row):
                if logged is not None:
                    await store.add_a2a_event(task.id, number, logged, row.updated_at)
            if not written:
                raise ConcurrentTaskModificationError(task.id)
        self._maybe_sweep(store)
        return RowVersion(number)

    async def _cancel(self, store: Store, task: Task, context: ServerCallContext, logged: bytes | None) -> int:
        tenant, agent_id = self.scope(context)
        for _ in range(CANCEL_ATTEMPTS):
            current = await store.a2a_task(tenant, agent_id, task.id)
            if current is None or TaskState.Value(current.state) in TERMINAL_TASK_STATES:
                raise ConcurrentTaskModificationError(task.id)
            if await store.replace_a2a_task(self._row(task, context, current.version + 1), current.version, logged):
                return current.version + 1
        raise ConcurrentTaskModificationError(task.id)      # others kept writing: the caller reloads

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        tenant, agent_id = self.scope(context)
        row = await self.store_of().a2a_task(tenant, agent_id, task_id)
        return None if row is None else StoredTask(Task.FromString(row.task), RowVersion(row.version))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """The agent's tasks, newest status first, filtered as `ListTasks` asks, a page at a time."""
        tenant, agent_id = self.scope(context)
        after = None
        if params.page_token:
            cursor = decode_list_tasks_cursor(params.page_token)
            if cursor is None:
                raise InvalidParamsError(message="Invalid page token: pass the next_page_token of a previous page")
            after = (-1 if cursor.timestamp_ns is None else cursor.timestamp_ns, cursor.task_id)
        try:
            state = TaskState.Name(params.status) if params.status else None
        except ValueError:
            raise InvalidParamsError(message=f"Unknown task state {params.status}") from None
        since = params.status_timestamp_after.ToNanoseconds() if params.HasField("status_timestamp_after") else None
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        rows, total = await self.store_of().list_a2a_tasks(tenant, agent_id, context_id=params.context_id or None,
                                                           state=state, since_ns=since, after=after, limit=size + 1)
        token = None
        if len(rows) > size:
            last = rows[size - 1]
            token = encode_list_tasks_cursor(ListTasksCursor(None if last.status_ns < 0 else last.status_ns, last.id))
        return ListTasksResponse(tasks=[Task.FromString(r.task) for r in rows[:size]], total_size=total,
                                 next_page_token=token, page_size=size)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        tenant, agent_id = self.scope(context)
        await self.store_of().delete_a2a_task(tenant, agent_id, task_id)

    def _maybe_sweep(self, store: Store) -> None:
        """Start the expiry in the background when this process has not run it for `SWEEP_EVERY` seconds."""
        now = time.monotonic()
        if now < self.next_sweep:
            return
        self.next_sweep = now + SWEEP_EVERY
        sweep = asyncio.create_task(self._sweep(store), name="a2a-task-expiry")
        self.sweeps.add(sweep)
        sweep.add_done_callback(self.sweeps.discard)

    async def _sweep(self, store: Store) -> None:
        try:
            await store.expire_a2a(time.time() - self.ttl, time.time() - EVENT_TTL)
        except Exception:       # noqa: BLE001 - the next sweep tries again; no task's write fails for it
            log.warning("expiring A2A tasks failed", exc_info=True)


class SharedEventStream(TaskEventStream):
    """Another process's task followed through the events its writes logged (polled; no broker needed).

    `SharedTaskStore.save` logs each event with the version it made, so `publish` has nothing to do. A
    follower that finds the task moved on without an event for it (its events expired) is given the task
    itself, and a task that stopped while running (its process died: no live lease on its session, no
    write for `STALL_SECONDS`) ends the stream instead of leaving the client waiting."""

    def __init__(self, store_of: StoreOf):
        self.store_of = store_of

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        del task_id, event          # logged by the write that made it

    async def destroy(self, task_id: str) -> None:
        del task_id                 # the expiry sweep deletes old events

    async def subscribe(self, task_id: str, *, after: TaskVersion) -> AsyncGenerator[VersionedEvent, None]:
        store, cursor = self.store_of(), version_number(after)
        moved = checked = time.monotonic()
        while True:
            events = await store.a2a_events(task_id, cursor)
            for number, data in events:
                cursor, moved = number, time.monotonic()
                yield VersionedEvent(event=event_of(data), version=RowVersion(number))
            if events:
                continue
            await asyncio.sleep(POLL_SECONDS)
            if time.monotonic() - checked < CHECK_SECONDS:
                continue
            checked = time.monotonic()
            head = await store.a2a_task_head(task_id)
            if head is None:
                return                      # deleted meanwhile
            version, state, context_id = head[0], TaskState.Value(head[1]), head[2]
            if version > cursor and not await store.a2a_events(task_id, cursor, limit=1):
                # written without a logged event (or its event expired): the task itself says where it is
                row = await store.a2a_task_by_id(task_id)
                if row is None:
                    return
                cursor, moved = row.version, time.monotonic()
                yield VersionedEvent(event=Task.FromString(row.task), version=RowVersion(row.version))
                state = TaskState.Value(row.state)
            if state in TERMINAL_TASK_STATES or state in INTERRUPTED_TASK_STATES:
                if version <= cursor:       # not running, and everything it wrote was seen
                    return
            elif time.monotonic() - moved > STALL_SECONDS and not await store.open_turns(context_id):
                # its session has no queued or running turn (a worker would take a dead one's over)
                log.warning("A2A task %s stopped without finishing; its stream ends", task_id)
                return


async def follow(tasks: SharedTaskStore, stream: SharedEventStream, task_id: str,
                 context: ServerCallContext) -> AsyncGenerator[Any, None]:
    """`SubscribeToTask` through the database, wherever the task runs: the task as stored, then its events up
    to its end or pause. (The SDK taps the in-memory runner of the process instead whenever that process has
    one, and a process keeps the runner of a task it paused while another process answers it: a
    subscription there would wait for events that never come.)"""
    stored = await tasks.get(task_id, context)
    if stored is None:
        raise TaskNotFoundError
    if stored.task.status.state in TERMINAL_TASK_STATES:
        raise UnsupportedOperationError(message=f"Task {task_id} is in terminal state: "
                                                f"{TaskState.Name(stored.task.status.state)}")
    yield stored.task
    if stored.task.status.state in INTERRUPTED_TASK_STATES:
        return                  # nothing runs until someone answers it
    async for versioned in stream.subscribe(task_id, after=stored.version):
        event = versioned.event
        yield event
        if isinstance(event, Message) or (isinstance(event, TaskStatusUpdateEvent | Task) and (
                event.status.state in TERMINAL_TASK_STATES or event.status.state in INTERRUPTED_TASK_STATES)):
            return
