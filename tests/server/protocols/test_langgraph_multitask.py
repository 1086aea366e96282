"""LangGraph Server's double texting, background work and crons through langgraph-sdk, unchanged: a run sent to a
busy thread follows its `multitask_strategy` (reject: 409 at once; enqueue: after the running one, in arrival
order; interrupt: the running one stops, `interrupted`, what it did kept; rollback: the running one stops and
is deleted), `/runs/batch` and `runs.delete`, and a cron that runs the agent and stops when deleted."""
from __future__ import annotations

import asyncio
import uuid

import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from tests.server.helpers import CHAT_DSL, chat_answer
from tests.server.protocols.conftest import long_dsl
from tests.server.protocols.test_langgraph_api import client, title


async def started(lg, thread: str, run_id: str) -> None:
    """Wait until a background run has done a step (it runs)."""
    async for part in lg.runs.join_stream(thread, run_id):
        if part.event == "updates":
            return


async def overtaken(lg, agent_id: str, strategy: str, query: str) -> tuple[str, dict, dict]:
    """(thread, first run, second run): a long run that has started, then a second one sent with `strategy`,
    started too."""
    thread = (await lg.threads.create())["thread_id"]
    first = await lg.runs.create(thread, agent_id, input={"query": "go"}, stream_mode=["updates"])
    await started(lg, thread, first["run_id"])
    second = await lg.runs.create(thread, agent_id, input={"query": query}, multitask_strategy=strategy,
                                  stream_mode=["updates"])
    await started(lg, thread, second["run_id"])
    return thread, first, second


async def test_reject_refuses_a_run_to_a_busy_thread_at_once(server, alice):
    slow = alice.agent(long_dsl(), title())
    lg = client(server, alice)
    thread = (await lg.threads.create())["thread_id"]
    first = await lg.runs.create(thread, slow, input={"query": "go"}, stream_mode=["updates"])
    with pytest.raises(ConflictError):
        await lg.runs.create(thread, slow, input={"query": "again"})          # multitask_strategy reject, the default
    await lg.runs.cancel(thread, first["run_id"], wait=True)


async def test_enqueue_runs_after_the_running_one_in_arrival_order(server, alice):
    chat = alice.agent(CHAT_DSL, title())
    lg = client(server, alice)
    thread = (await lg.threads.create())["thread_id"]
    runs = [await lg.runs.create(thread, chat, input={"query": f"q{i}"}, multitask_strategy="enqueue")
            for i in range(3)]
    answers = [(await lg.runs.join(thread, run["run_id"]))["answer"] for run in runs]
    assert answers == [chat_answer(1), chat_answer(2), chat_answer(3)]
    listed = await lg.runs.list(thread)
    assert [r["status"] for r in listed] == ["success"] * 3


async def test_interrupt_stops_the_running_run_and_keeps_what_it_did(server, alice):
    lg = client(server, alice)
    thread, first, second = await overtaken(lg, alice.agent(long_dsl(), title()), "interrupt", "now this")
    assert (await lg.runs.get(thread, first["run_id"]))["status"] == "interrupted"
    await lg.runs.cancel(thread, second["run_id"], wait=True)
    history = [s async for s in _history(lg, thread)]
    assert any(s["metadata"].get("message_id") for s in history)      # the interrupted run's steps are kept


async def _history(lg, thread: str):
    for state in await lg.threads.get_history(thread, limit=100):
        yield state


async def test_rollback_stops_the_running_run_and_deletes_it(server, alice):
    slow = alice.agent(long_dsl(), title())
    lg = client(server, alice)
    thread, first, second = await overtaken(lg, slow, "rollback", "instead")
    with pytest.raises(NotFoundError):
        await lg.runs.get(thread, first["run_id"])                    # the rolled back run is gone
    session = alice.ok("GET", f"/agents/{slow}/sessions/{thread}")
    assert [m["content"] for m in session["messages"] if m["role"] == "user"] == ["instead"]
    await lg.runs.cancel(thread, second["run_id"], wait=True)


async def test_a_batch_of_background_runs_and_a_deleted_run(server, alice):
    chat = alice.agent(CHAT_DSL, title())
    lg = client(server, alice)
    made = await lg.runs.create_batch([{"assistant_id": chat, "input": {"query": f"b{i}"}} for i in range(3)])
    assert len(made) == 3 and len({r["thread_id"] for r in made}) == 3
    for run in made:
        assert (await lg.runs.join(run["thread_id"], run["run_id"]))["answer"] == chat_answer(1)
    await lg.runs.delete(made[0]["thread_id"], made[0]["run_id"])
    with pytest.raises(NotFoundError):
        await lg.runs.get(made[0]["thread_id"], made[0]["run_id"])


async def test_a_cron_runs_the_agent_until_it_is_deleted(server, alice):
    chat = alice.agent(CHAT_DSL, title())
    lg = client(server, alice)
    thread = (await lg.threads.create())["thread_id"]
    cron = await lg.crons.create_for_thread(thread, chat, schedule="* * * * * *", input={"query": "tick"})
    assert cron["thread_id"] == thread and cron["enabled"] is True and cron["next_run_date"]
    assert [c["cron_id"] for c in await lg.crons.search(assistant_id=chat)] == [cron["cron_id"]]
    for _ in range(150):                                  # the workers look every 5 s
        if await lg.runs.list(thread):
            break
        await asyncio.sleep(0.2)
    runs = await lg.runs.list(thread)
    assert runs, "the cron did not run"
    await lg.runs.join(thread, runs[-1]["run_id"])
    state = await lg.threads.get_state(thread)
    assert state["values"]["answer"] == chat_answer(1)
    await lg.crons.delete(cron["cron_id"])
    assert await lg.crons.count(assistant_id=chat) == 0
    stateless = await lg.crons.create(chat, schedule="0 9 * * *", input={"query": "morning"}, timezone="Europe/Paris")
    assert stateless["thread_id"] is None and stateless["on_run_completed"] == "delete"
    await lg.crons.delete(stateless["cron_id"])


async def test_a_bad_cron_or_strategy_is_refused_naming_what_is_wrong(server, alice):
    chat = alice.agent(CHAT_DSL, title())
    lg = client(server, alice)
    for body, word in (({"schedule": "every minute"}, "schedule"), ({"schedule": "* * * * *", "timezone": "Nowhere/X"},
                                                                    "timezone")):
        with pytest.raises(Exception) as refused:
            await lg.crons.create(chat, input={"query": "x"}, **body)
        assert word in str(refused.value)
    thread = (await lg.threads.create())["thread_id"]
    with pytest.raises(Exception) as refused:
        await lg.runs.create(thread, chat, input={"query": "x"}, multitask_strategy="sometimes")
    assert "multitask_strategy" in str(refused.value)
    with pytest.raises(NotFoundError):
        await lg.crons.delete(str(uuid.uuid4()))
