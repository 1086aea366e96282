"""A2A tasks across two `canvas2graph serve` processes on one PostgreSQL database, as behind a load balancer
without session affinity: a task sent to one process is got, listed, answered, cancelled and followed on the
other, and another tenant finds none of it."""
from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from a2a.helpers.proto_helpers import get_message_text
from a2a.types import CancelTaskRequest, GetTaskRequest, ListTasksRequest, SubscribeToTaskRequest, TaskState

from tests.runtime.checkpointers import postgres_url
from tests.server.helpers import CHAT_DSL, FEEDBACK_DSL, FINAL, TIPS, Api, Server, chat_answer, cpn, make_token, wait_for
from tests.server.protocols.conftest import PACED_SCRIPT, long_dsl
from tests.server.protocols.test_a2a_server import a2a, last_task, user

TASK_NOT_FOUND, UNSUPPORTED = -32001, -32004


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    db, tmp = postgres_url(), tmp_path_factory.mktemp("a2a-processes")
    with Server(db, tmp, PACED_SCRIPT) as one, Server(db, tmp, PACED_SCRIPT) as other:
        yield one, other


@pytest.fixture(scope="module")
def alice(servers):
    api = Api(servers[0], make_token(servers[0].db, f"alice-{uuid.uuid4().hex[:6]}"))
    yield api
    api.close()


@pytest.fixture(scope="module")
def bob(servers):
    api = Api(servers[1], make_token(servers[1].db, f"bob-{uuid.uuid4().hex[:6]}"))
    yield api
    api.close()


def rpc(server, agent_id: str, token: str, method: str, params: dict) -> httpx.Response:
    return httpx.post(f"{server.url}/api/v1/agents/{agent_id}/a2a", timeout=60,
                      headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
                      json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


async def stream_until(client, request, text: str):
    """Start a streamed message and read it until a status update mentions `text`: (the stream, the task id)."""
    stream = client.send_message(request)
    async for response in stream:
        update = response.status_update if response.HasField("status_update") else None
        if update is not None and text in get_message_text(update.status.message):
            return stream, update.task_id, update.context_id
    raise AssertionError(f"the stream ended before {text!r}")


async def test_a_task_sent_to_one_process_is_got_and_listed_on_the_other(servers, alice):
    one, other = servers
    agent_id = alice.agent(CHAT_DSL)
    async with a2a(one, agent_id, alice.token, streaming=False) as client:
        sent = await last_task(client, user("hello"))
    assert sent.status.state == TaskState.TASK_STATE_COMPLETED
    async with a2a(other, agent_id, alice.token, streaming=False) as client:
        got = await client.get_task(GetTaskRequest(id=sent.id))
        listed = await client.list_tasks(ListTasksRequest(context_id=sent.context_id, include_artifacts=True))
    assert got.id == sent.id and got.context_id == sent.context_id
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and get_message_text(got.status.message) == chat_answer(1)
    assert "".join(p.text for p in got.artifacts[0].parts) == chat_answer(1)
    assert [t.id for t in listed.tasks] == [sent.id] and listed.total_size == 1


async def test_a_task_paused_on_one_process_is_answered_on_the_other(servers, alice):
    one, other = servers
    agent_id = alice.agent(FEEDBACK_DSL)
    async with a2a(one, agent_id, alice.token, streaming=False) as client:
        paused = await last_task(client, user("coffee"))
    assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and get_message_text(paused.status.message) == TIPS
    async with a2a(other, agent_id, alice.token, streaming=False) as client:
        done = await last_task(client, user(data={"feedback": "bolder"}, context_id=paused.context_id,
                                            task_id=paused.id))
    assert done.id == paused.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(done.status.message) == FINAL
    async with a2a(one, agent_id, alice.token, streaming=False) as client:      # the first process sees the end
        seen = await client.get_task(GetTaskRequest(id=paused.id))
        assert seen.status.state == TaskState.TASK_STATE_COMPLETED
        # its parked runner of the task does not take a message for the finished task
        again = rpc(one, agent_id, alice.token, "SendMessage", {"message": {
            "role": "ROLE_USER", "messageId": uuid.uuid4().hex, "taskId": paused.id, "contextId": paused.context_id,
            "parts": [{"text": "more"}]}}).json()
        assert "error" in again and "terminal" in again["error"]["message"]


async def test_cancel_on_one_process_stops_the_turn_running_on_the_other(servers, alice):
    one, other = servers
    agent_id = alice.agent(long_dsl())
    async with a2a(one, agent_id, alice.token) as running:
        stream, task_id, context_id = await stream_until(running, user("go"), "LLM:S2")
        async with a2a(other, agent_id, alice.token) as client:
            canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        # the first process's own stream ends with the task canceled
        last = None
        async for response in stream:
            last = response
        assert last is not None and TaskState.TASK_STATE_CANCELED in (
            last.task.status.state, last.status_update.status.state)

    def last_turn():
        turns = alice.ok("GET", f"/agents/{agent_id}/sessions/{context_id}/trace")["turns"]
        return turns and turns[-1]["status"] not in ("running", None) and turns[-1]

    turn = await asyncio.to_thread(wait_for, last_turn, 60, "the cancelled turn's end")
    assert turn["status"] == "cancelled" and len(turn["steps"]) < 20
    async with a2a(one, agent_id, alice.token) as client:
        assert (await client.get_task(GetTaskRequest(id=task_id))).status.state == TaskState.TASK_STATE_CANCELED


async def test_a_task_running_on_one_process_is_followed_to_its_end_on_the_other(servers, alice):
    one, other = servers
    agent_id = alice.agent(long_dsl(12))
    async with a2a(one, agent_id, alice.token) as running:
        stream, task_id, _context = await stream_until(running, user("go"), "LLM:S2")
        await stream.aclose()                   # the client's connection broke: the turn goes on
        async with a2a(other, agent_id, alice.token) as client:
            followed = [r async for r in client.subscribe(SubscribeToTaskRequest(id=task_id))]
    assert followed[0].task.id == task_id and followed[0].task.status.state == TaskState.TASK_STATE_WORKING
    updates = [r.status_update for r in followed if r.HasField("status_update")]
    assert "LLM:S12 finished" in [get_message_text(u.status.message) for u in updates]
    assert updates[-1].status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(updates[-1].status.message) == "Answer 12 from LLM:S12."
    chunks = [r.artifact_update for r in followed if r.HasField("artifact_update")]
    assert chunks and chunks[-1].last_chunk
    # a finished task has nothing more to stream: a clear error, on either process
    for server in servers:
        refused = rpc(server, agent_id, alice.token, "SubscribeToTask", {"id": task_id})
        assert refused.json()["error"]["code"] == UNSUPPORTED


def form_then_long_dsl(steps: int = 10) -> dict:
    """begin -> UserFillUp:Ask (pauses for `feedback`) -> LLM:S1 -> ... -> LLM:S<steps> -> Message:M."""
    dsl = long_dsl(steps)
    dsl["components"]["begin"] = cpn("Begin", {}, ["UserFillUp:Ask"])
    dsl["components"]["UserFillUp:Ask"] = cpn("UserFillUp", {"enable_tips": True, "tips": "Go on?", "inputs": {
        "feedback": {"type": "line", "name": "Feedback", "optional": False}}}, ["LLM:S1"])
    return dsl


async def test_a_paused_task_answered_on_the_other_process_is_followed_on_the_first(servers, alice):
    one, other = servers
    agent_id = alice.agent(form_then_long_dsl())
    async with a2a(one, agent_id, alice.token, streaming=False) as client:
        paused = await last_task(client, user("go"))
    async with a2a(one, agent_id, alice.token) as first:
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        # a paused task streams nothing until answered: its subscription gives the task and ends
        alone = [r async for r in first.subscribe(SubscribeToTaskRequest(id=paused.id))]
        assert [r.task.status.state for r in alone] == [TaskState.TASK_STATE_INPUT_REQUIRED]
        async with a2a(other, agent_id, alice.token) as second:
            answer = user(data={"feedback": "yes"}, context_id=paused.context_id, task_id=paused.id)
            stream, _task, _context = await stream_until(second, answer, "LLM:S2")
            await stream.aclose()
        # the first process holds a runner of the task from its pause: the stream still follows the other's run
        followed = [r async for r in first.subscribe(SubscribeToTaskRequest(id=paused.id))]
    assert followed[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert followed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_another_tenant_finds_no_task_on_the_other_process(servers, alice, bob):
    one, other = servers
    agent_id = alice.agent(FEEDBACK_DSL)
    async with a2a(one, agent_id, alice.token, streaming=False) as client:
        paused = await last_task(client, user("coffee"))
    bobs = bob.agent(FEEDBACK_DSL)          # bob's own agent, asked on the other process for alice's task
    for method in ("GetTask", "CancelTask", "SubscribeToTask"):
        reply = rpc(other, bobs, bob.token, method, {"id": paused.id}).json()
        assert reply["error"]["code"] == TASK_NOT_FOUND, (method, reply)
    answer = {"message": {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "taskId": paused.id,
                          "parts": [{"data": {"feedback": "bolder"}}]}}
    assert rpc(other, bobs, bob.token, "SendMessage", answer).json()["error"]["code"] == TASK_NOT_FOUND
    assert rpc(other, bobs, bob.token, "ListTasks", {}).json()["result"].get("tasks", []) == []
    assert rpc(other, agent_id, bob.token, "GetTask", {"id": paused.id}).status_code == 404   # alice's agent
    # alice's own other agent does not see it either: tasks belong to their agent
    others = alice.agent(FEEDBACK_DSL)
    assert rpc(other, others, alice.token, "GetTask", {"id": paused.id}).json()["error"]["code"] == TASK_NOT_FOUND
    async with a2a(other, agent_id, alice.token, streaming=False) as client:     # and it is untouched
        assert (await client.get_task(GetTaskRequest(id=paused.id))).status.state == TaskState.TASK_STATE_INPUT_REQUIRED
