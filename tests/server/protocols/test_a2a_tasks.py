"""The A2A task store and event stream over the server's database (`a2a_tasks.py`), in one process on SQLite
and PostgreSQL: versions written by compare-and-set, cancel overriding them, tasks kept per tenant and agent,
lists in pages, and a task followed through its logged events."""
from __future__ import annotations

import uuid

import pytest
from a2a.server.cluster import ConcurrentTaskModificationError, TaskVersion
from a2a.server.context import ServerCallContext
from a2a.types import ListTasksRequest, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError

from canvas2graph.server.backend.store import open_store
from canvas2graph.server.protocols.a2a_tasks import SharedEventStream, SharedTaskStore


def call(tenant: str, agent: str = "agent") -> ServerCallContext:
    return ServerCallContext(state={"scope": (tenant, agent)})


def task(state: TaskState = TaskState.TASK_STATE_WORKING, *, task_id: str | None = None, stamp: int = 0) -> Task:
    made = Task(id=task_id or str(uuid.uuid4()), context_id=f"ctx-{uuid.uuid4().hex[:8]}", status=TaskStatus(state=state))
    if stamp:
        made.status.timestamp.FromNanoseconds(stamp)
    return made


@pytest.fixture
async def tasks(durable_url):
    async with open_store(durable_url) as store:
        yield SharedTaskStore(lambda: store, lambda context: context.state["scope"]), store


async def test_each_write_names_the_version_it_read(tasks):
    shared, _store = tasks
    alice = call(f"alice-{uuid.uuid4().hex[:6]}")
    first = task(TaskState.TASK_STATE_SUBMITTED)
    v1 = await shared.save(first, prev_version=TaskVersion.MISSING, context=alice)
    with pytest.raises(ConcurrentTaskModificationError):          # a second first write
        await shared.save(first, prev_version=TaskVersion.MISSING, context=alice)
    working = Task()
    working.CopyFrom(first)
    working.status.state = TaskState.TASK_STATE_WORKING
    v2 = await shared.save(working, prev_version=v1, context=alice)
    assert v2.is_after(v1)
    with pytest.raises(ConcurrentTaskModificationError):          # written over a version it did not read
        await shared.save(working, prev_version=v1, context=alice)
    stored = await shared.get(first.id, alice)
    assert stored.task == working and stored.version == v2
    assert await shared.get(first.id, call("bob")) is None
    assert await shared.get(first.id, call(alice.state["scope"][0], "another agent")) is None


async def test_a_cancel_overwrites_an_unfinished_task_but_not_a_finished_one(tasks):
    shared, _store = tasks
    alice = call(f"alice-{uuid.uuid4().hex[:6]}")
    running = task()
    v1 = await shared.save(running, prev_version=TaskVersion.MISSING, context=alice)
    await shared.save(running, prev_version=v1, context=alice)         # another writer moved it on
    canceled = Task()
    canceled.CopyFrom(running)
    canceled.status.state = TaskState.TASK_STATE_CANCELED
    await shared.save(canceled, prev_version=v1, context=alice)        # stale, but a cancel
    assert (await shared.get(running.id, alice)).task.status.state == TaskState.TASK_STATE_CANCELED
    with pytest.raises(ConcurrentTaskModificationError):
        await shared.save(canceled, prev_version=TaskVersion.MISSING, context=alice)
    with pytest.raises(ConcurrentTaskModificationError):          # another tenant's: not there to cancel
        await shared.save(canceled, prev_version=TaskVersion.MISSING, context=call("bob"))


async def test_lists_come_in_pages_newest_status_first(tasks):
    shared, _store = tasks
    alice = call(f"alice-{uuid.uuid4().hex[:6]}")
    made = [task(stamp=stamp) for stamp in (3_000, 1_000, 2_000)] + [task()]
    for each in made:
        await shared.save(each, prev_version=TaskVersion.MISSING, context=alice)
    first = await shared.list(ListTasksRequest(page_size=2), alice)
    assert [t.id for t in first.tasks] == [made[0].id, made[2].id] and first.total_size == 4
    rest = await shared.list(ListTasksRequest(page_size=2, page_token=first.next_page_token), alice)
    assert [t.id for t in rest.tasks] == [made[1].id, made[3].id] and not rest.next_page_token
    assert (await shared.list(ListTasksRequest(context_id=made[3].context_id), alice)).tasks == [made[3]]
    with pytest.raises(InvalidParamsError, match="page token"):
        await shared.list(ListTasksRequest(page_token="bm90IGEgY3Vyc29y"), alice)
    with pytest.raises(InvalidParamsError, match="state"):
        await shared.list(ListTasksRequest(status=99), alice)
    assert (await shared.list(ListTasksRequest(), call("bob"))).tasks == []


async def test_a_followed_task_streams_its_logged_events_to_its_end(tasks):
    shared, store = tasks
    alice = call(f"alice-{uuid.uuid4().hex[:6]}")
    running = task()
    version = await shared.save(running, prev_version=TaskVersion.MISSING, context=alice)
    followed = SharedEventStream(lambda: store).subscribe(running.id, after=version)
    chunk = TaskArtifactUpdateEvent(task_id=running.id, context_id=running.context_id)
    chunk.artifact.artifact_id = "answer"
    version = await shared.save(running, event=chunk, prev_version=version, context=alice)
    assert (await anext(followed)).event == chunk
    # a write that logged no event: the follower gets the task itself, and stops once it finished
    done = Task()
    done.CopyFrom(running)
    done.status.state = TaskState.TASK_STATE_COMPLETED
    await shared.save(done, prev_version=version, context=alice)
    assert (await anext(followed)).event == done
    with pytest.raises(StopAsyncIteration):
        await anext(followed)
    replayed = SharedEventStream(lambda: store).subscribe(running.id, after=TaskVersion.MISSING)
    assert (await anext(replayed)).event == chunk      # from the start: every logged event, in order
    await replayed.aclose()


async def test_following_a_task_that_no_process_runs_ends(tasks, monkeypatch):
    from canvas2graph.server.protocols import a2a_tasks
    monkeypatch.setattr(a2a_tasks, "CHECK_SECONDS", 0.05)
    monkeypatch.setattr(a2a_tasks, "STALL_SECONDS", 0.3)
    shared, store = tasks
    alice = call(f"alice-{uuid.uuid4().hex[:6]}")
    orphan = task()             # working, but no process holds its session (its process died)
    version = await shared.save(orphan, prev_version=TaskVersion.MISSING, context=alice)
    followed = [e async for e in SharedEventStream(lambda: store).subscribe(orphan.id, after=version)]
    assert followed == []
