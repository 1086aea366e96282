"""Agents as A2A agents, driven by the official `a2a-sdk` client on SQLite and PostgreSQL: the card, a
message answered, a streamed run (status and artifact updates), a context continuing a session, a pause as
`input-required` resumed by the next message, `tasks/get`, `tasks/cancel`, A2A 0.3's method names, and
tenants kept apart."""
from __future__ import annotations

import asyncio
import json
import uuid
from contextlib import asynccontextmanager

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import get_message_text, new_data_part, new_message, new_text_message
from a2a.types import CancelTaskRequest, GetTaskRequest, Role, SendMessageRequest, TaskState

from tests.server.helpers import CHAT_DSL, FEEDBACK_DSL, FINAL, TIPS, chat_answer, wait_for
from tests.server.protocols.conftest import long_dsl


@asynccontextmanager
async def a2a(server, agent_id: str, token: str, *, streaming: bool = True):
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        client = await create_client(f"{server.url}/api/v1/agents/{agent_id}/a2a",
                                     client_config=ClientConfig(httpx_client=http, streaming=streaming))
        try:
            yield client
        finally:
            await client.close()


def user(text: str | None = None, *, data: dict | None = None, context_id: str | None = None,
         task_id: str | None = None) -> SendMessageRequest:
    parts = ([] if text is None else new_text_message(text).parts[:]) + ([new_data_part(data)] if data else [])
    return SendMessageRequest(message=new_message(list(parts), context_id=context_id, task_id=task_id,
                                                  role=Role.ROLE_USER))


async def last_task(client, request: SendMessageRequest):
    """Send a message without streaming: the reply's task, once it ended or paused."""
    task = None
    async for response in client.send_message(request):
        if response.HasField("task"):
            task = response.task
    return task


async def test_the_card_names_the_agent_and_its_json_rpc_endpoint(server, alice, bob):
    agent_id = alice.ok("POST", "/agents", {"title": f"Desk {uuid.uuid4().hex[:6]}", "description": "Answers.",
                                            "dsl": CHAT_DSL})["id"]
    path = f"/api/v1/agents/{agent_id}/a2a/.well-known/agent-card.json"
    card = httpx.get(server.url + path, headers={"Authorization": f"Bearer {alice.token}"}).json()
    assert card["name"].startswith("Desk ") and card["description"] == "Answers." and card["capabilities"]["streaming"]
    assert {i["url"] for i in card["supportedInterfaces"]} == {f"{server.url}/api/v1/agents/{agent_id}/a2a"}
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert httpx.get(server.url + path).status_code == 401
    assert httpx.get(server.url + path, headers={"Authorization": f"Bearer {bob.token}"}).status_code == 404


async def test_a_message_is_answered_and_its_context_is_the_session_that_continues(server, alice):
    agent_id = alice.agent(CHAT_DSL)
    async with a2a(server, agent_id, alice.token, streaming=False) as client:
        first = await last_task(client, user("hello"))
        assert first.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(first.status.message) == chat_answer(1)
        second = await last_task(client, user("again", context_id=first.context_id))
        assert get_message_text(second.status.message) == chat_answer(2)
        assert second.context_id == first.context_id and second.id != first.id
        fetched = await client.get_task(GetTaskRequest(id=first.id))
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    session = alice.ok("GET", f"/agents/{agent_id}/sessions/{first.context_id}")       # the context is a session
    assert [m["content"] for m in session["messages"] if m["role"] == "user"] == ["hello", "again"]


async def test_a_streamed_run_reports_components_and_streams_the_answer_as_an_artifact(server, alice):
    agent_id = alice.agent(CHAT_DSL)
    statuses, chunks = [], []
    async with a2a(server, agent_id, alice.token) as client:
        async for response in client.send_message(user("hello")):
            if response.HasField("status_update"):
                update = response.status_update
                statuses.append((update.status.state, get_message_text(update.status.message)))
            elif response.HasField("artifact_update"):
                chunks.append(response.artifact_update)
    working = [text for state, text in statuses if state == TaskState.TASK_STATE_WORKING and text]
    assert working == ["begin started", "begin finished", "LLM:A started", "Message:M started", "LLM:A finished",
                       "Message:M finished"]
    assert statuses[-1] == (TaskState.TASK_STATE_COMPLETED, chat_answer(1))
    assert "".join(get_message_text(c.artifact) for c in chunks) == chat_answer(1) and len(chunks) > 2
    assert {c.artifact.name for c in chunks} == {"answer"} and chunks[-1].last_chunk and chunks[1].append


async def test_a_form_pauses_as_input_required_and_the_next_message_on_the_task_resumes_it(server, alice):
    agent_id = alice.agent(FEEDBACK_DSL)
    async with a2a(server, agent_id, alice.token, streaming=False) as client:
        paused = await last_task(client, user("coffee"))
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert get_message_text(paused.status.message) == TIPS
        form = paused.status.message.parts[1].data.struct_value["form"]
        assert form["feedback"]["name"] == "Feedback"
        done = await last_task(client, user(data={"feedback": "bolder"}, context_id=paused.context_id,
                                            task_id=paused.id))
        assert done.id == paused.id and done.status.state == TaskState.TASK_STATE_COMPLETED
        assert get_message_text(done.status.message) == FINAL
        # a one-field form also takes the answer as text, on a new task of the context
        again = await last_task(client, user("tea", context_id=paused.context_id))
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        done = await last_task(client, user("bolder", context_id=paused.context_id, task_id=again.id))
        assert get_message_text(done.status.message) == FINAL


async def test_cancelling_a_task_cancels_its_turn(server, alice):
    agent_id = alice.agent(long_dsl())
    async with a2a(server, agent_id, alice.token) as client:
        stream = client.send_message(user("go"))
        task_id = context_id = None
        async for response in stream:
            update = response.status_update if response.HasField("status_update") else None
            if update is not None and "LLM:S2" in get_message_text(update.status.message):
                task_id, context_id = update.task_id, update.context_id
                break
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await stream.aclose()

        def last_turn():
            turns = alice.ok("GET", f"/agents/{agent_id}/sessions/{context_id}/trace")["turns"]
            return turns and turns[-1]["status"] not in ("running", None) and turns[-1]

        turn = await asyncio.to_thread(wait_for, last_turn, 60, "the cancelled turn's end")
        assert turn["status"] == "cancelled" and len(turn["steps"]) < 10


async def test_a2a_0_3_method_names_are_served_on_the_same_endpoint(server, alice):
    agent_id = alice.agent(CHAT_DSL)
    url = f"{server.url}/api/v1/agents/{agent_id}/a2a"
    headers = {"Authorization": f"Bearer {alice.token}"}
    message = {"role": "user", "messageId": uuid.uuid4().hex, "kind": "message", "parts": [{"kind": "text", "text": "hi"}]}
    sent = httpx.post(url, headers=headers, timeout=60, json={"jsonrpc": "2.0", "id": 1, "method": "message/send",
                                                              "params": {"message": message}}).json()["result"]
    assert sent["kind"] == "task" and sent["status"]["state"] == "completed"
    assert sent["status"]["message"]["parts"][0]["text"] == chat_answer(1)
    got = httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
                                                 "params": {"id": sent["id"]}}).json()["result"]
    assert got["id"] == sent["id"] and got["contextId"] == sent["contextId"]
    streamed = {"jsonrpc": "2.0", "id": 3, "method": "message/stream",
                "params": {"message": {**message, "messageId": uuid.uuid4().hex, "contextId": sent["contextId"]}}}
    with httpx.stream("POST", url, headers=headers, json=streamed, timeout=60) as reply:
        results = [json.loads(line[len("data:"):])["result"] for line in reply.iter_lines() if line.startswith("data:")]
    kinds = [r["kind"] for r in results]
    assert "artifact-update" in kinds and results[-1]["kind"] == "status-update" and results[-1]["final"]
    assert results[-1]["status"]["state"] == "completed"
    assert "".join(p["text"] for r in results if r["kind"] == "artifact-update"
                   for p in r["artifact"]["parts"]) == chat_answer(2)       # the context's second turn


async def test_another_tenant_can_neither_reach_the_agent_nor_its_tasks_nor_its_sessions(server, alice, bob):
    agent_id = alice.agent(CHAT_DSL)
    async with a2a(server, agent_id, alice.token, streaming=False) as client:
        task = await last_task(client, user("hello"))
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task.id}}
    url = f"{server.url}/api/v1/agents/{agent_id}/a2a"
    assert httpx.post(url, json=rpc).status_code == 401
    assert httpx.post(url, json=rpc, headers={"Authorization": f"Bearer {bob.token}"}).status_code == 404
    bobs = bob.agent(CHAT_DSL)           # bob's own agent, asked for alice's task and context
    bob_url = f"{server.url}/api/v1/agents/{bobs}/a2a"
    reply = httpx.post(bob_url, json=rpc, headers={"Authorization": f"Bearer {bob.token}"}).json()
    assert "error" in reply and "result" not in reply
    async with a2a(server, bobs, bob.token, streaming=False) as client:
        refused = await last_task(client, user("hi", context_id=task.context_id))
    assert refused.status.state == TaskState.TASK_STATE_FAILED
    assert "not available" in get_message_text(refused.status.message)


def test_the_server_starts_without_a2a_sdk_warning_of_an_incomplete_card(server):
    # the handler's card stands for every agent's; a2a-sdk warns at startup when it lacks interfaces or skills
    assert "not spec-compliant" not in server.log.read_text(errors="replace")
