"""The stream modes LangGraph Server builds itself, not LangGraph (`events`: astream_events' events;
`messages`: `messages/metadata`, then `messages/partial` with each message so far), sent by `/langgraph`
as a real LangGraph Server sends them for the same canvas: `langgraph dev` (langgraph-api, PyPI
`langgraph-cli[inmem]`) serving the folder `canvas2graph langgraph` writes, both driven by langgraph-sdk's
client, on SQLite and PostgreSQL. Ids, times and LangGraph Server's own metadata differ; the events, their
order, nesting, names and data do not."""
from __future__ import annotations

import json
import os
import uuid

import pytest
from langgraph_sdk import get_client

from canvas2graph.cli import main
from tests.canvas2graph.cli.test_langgraph_server import LANGGRAPH, LangGraphDev
from tests.server.helpers import CHAT_DSL, FEEDBACK_DSL, SCRIPT, TIPS, chat_answer

GRAPHS = {"chat": CHAT_DSL, "feedback": FEEDBACK_DSL}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """`langgraph dev` serving the chat and feedback canvases (graphs "chat" and "feedback")."""
    if not LANGGRAPH.exists():
        message = "langgraph-cli[inmem] is not installed (pip install -e '.[test]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    tmp = tmp_path_factory.mktemp("langgraph-reference")
    files = []
    for name, dsl in GRAPHS.items():
        files.append(tmp / f"{name}.json")
        files[-1].write_text(json.dumps(dsl))
    out = tmp / "served"
    assert main(["langgraph", *map(str, files), "--out", str(out)]) == 0
    script = tmp / "script.json"
    script.write_text(json.dumps(SCRIPT))
    served = LangGraphDev(out, script)
    try:
        served.wait_ready()
        yield served
    finally:
        served.stop()


class Both:
    """The same canvas as an assistant of LangGraph Server and of canvas2graph, and a client of each."""

    def __init__(self, reference, server, api, graph: str):
        self.theirs = get_client(url=reference.url)
        self.ours = get_client(url=server.url + "/langgraph", headers={"Authorization": f"Bearer {api.token}"})
        self.graph = graph
        self.agent_id = api.agent(GRAPHS[graph], f"{graph} {uuid.uuid4().hex[:6]}")

    async def run(self, client, thread: str, **run) -> dict[str, list]:
        assistant = self.graph if client is self.theirs else self.agent_id
        parts: dict[str, list] = {}
        async for part in client.runs.stream(thread, assistant, **run):
            parts.setdefault(part.event, []).append(part.data)
        return parts

    async def runs(self, *turns: dict) -> tuple[list[dict], list[dict]]:
        """Each run on a new thread of each server, one after the other: (theirs, ours)."""
        results = ([], [])
        for side, client in enumerate((self.theirs, self.ours)):
            thread = (await client.threads.create())["thread_id"]
            for run in turns:
                results[side].append(await self.run(client, thread, **run))
        return results


def outline(events: list[dict], run_id: str) -> list[tuple]:
    """What a client reads from `events`: each event's kind, its runnable's name (the root's is the
    graph's, which LangGraph Server names after the graph id), its depth, its node and its data's keys."""
    assert events[0]["run_id"] == run_id and events[0]["parent_ids"] == []
    ids = {e["run_id"] for e in events}
    assert all(set(e["parent_ids"]) <= ids for e in events)        # every parent is an event of the run
    return [(e["event"], "<graph>" if e["run_id"] == run_id else e["name"], len(e["parent_ids"]),
             e["metadata"].get("langgraph_node"), sorted(e["data"])) for e in events]


def written(updates: list[dict]) -> list[dict]:
    """Each update's nodes and the keys they wrote (a pause: its interrupts' values)."""
    return [{node: [i["value"] for i in update] if node == "__interrupt__" else sorted(update or {})
             for node, update in u.items()} for u in updates]


def chunks(events: list[dict]) -> list[str]:
    return [e["data"]["chunk"]["content"] for e in events if e["event"] == "on_chat_model_stream"]


async def test_events_are_the_runs_astream_events_as_langgraph_server_sends_them(reference, server, alice):
    both = Both(reference, server, alice, "chat")
    [theirs], [ours] = await both.runs({"input": {"query": "Capital of France?"}, "stream_mode": ["events", "values"]})
    assert outline(ours["events"], ours["metadata"][0]["run_id"]) == \
        outline(theirs["events"], theirs["metadata"][0]["run_id"])
    assert chunks(ours["events"]) == chunks(theirs["events"]) and "".join(chunks(ours["events"])) == "Answer 1 from LLM:A."
    # the graph's own stream is not among the events: it is the other modes'
    assert not [e for e in ours["events"] if e["event"] == "on_chain_stream" and not e["parent_ids"]]
    assert ours["values"][-1]["answer"] == theirs["values"][-1]["answer"] == chat_answer(1)
    ended = ours["events"][-1]
    assert ended["event"] == "on_chain_end" and ended["data"]["output"]["answer"] == chat_answer(1)
    model = next(e for e in ours["events"] if e["event"] == "on_chat_model_stream")
    assert model["metadata"]["component_id"] == "Message:M" and model["metadata"]["llm_component_id"] == "LLM:A"


async def test_a_pause_and_its_resume_stream_their_events_and_the_interrupt_as_langgraph_server_does(
        reference, server, alice):
    both = Both(reference, server, alice, "feedback")
    modes = ["events", "values", "updates"]
    theirs, ours = await both.runs({"input": {"query": "coffee"}, "stream_mode": modes},
                                   {"command": {"resume": {"feedback": "bolder"}}, "stream_mode": modes})
    for t, o in zip(theirs, ours):
        assert outline(o["events"], o["metadata"][0]["run_id"]) == outline(t["events"], t["metadata"][0]["run_id"])
    paused_theirs, paused_ours = theirs[0]["values"][-1], ours[0]["values"][-1]
    # the last values are the state as it paused, with the form's interrupt
    assert list(paused_ours) == list(paused_theirs) and "__interrupt__" in paused_ours
    assert paused_ours["__interrupt__"][0]["value"] == paused_theirs["__interrupt__"][0]["value"]
    assert paused_ours["__interrupt__"][0]["value"]["tips"] == TIPS
    assert written(ours[0]["updates"]) == written(theirs[0]["updates"])
    assert list(ours[0]["updates"][-1]) == ["__interrupt__"]
    assert ours[1]["values"][-1]["answer"] == theirs[1]["values"][-1]["answer"]


async def test_messages_are_sent_whole_so_far_as_langgraph_server_sends_them(reference, server, alice):
    both = Both(reference, server, alice, "chat")
    [theirs], [ours] = await both.runs({"input": {"query": "Capital of France?"}, "stream_mode": "messages"})
    assert [k for k in ours if k != "metadata"] == [k for k in theirs if k != "metadata"] == \
        ["messages/metadata", "messages/partial"]
    [[(message_id, seen)]] = [list(m.items()) for m in ours["messages/metadata"]]
    [[(_, seen_there)]] = [list(m.items()) for m in theirs["messages/metadata"]]
    assert seen["metadata"]["component_id"] == seen_there["metadata"]["component_id"] == "Message:M"
    assert seen["metadata"]["langgraph_node"] == seen_there["metadata"]["langgraph_node"] == "Message.M"

    def texts(parts):
        return [(m["type"], m["content"]) for [m] in parts["messages/partial"]]
    assert texts(ours) == texts(theirs) == [("ai", "Answer 1 "), ("ai", "Answer 1 from LLM:A.")]
    assert {m["id"] for [m] in ours["messages/partial"]} == {message_id}
    assert ours["messages/partial"][-1][0].keys() == theirs["messages/partial"][-1][0].keys()


async def test_a_pause_streamed_without_events_ends_its_values_with_the_interrupt_as_langgraph_server_does(
        reference, server, alice):
    both = Both(reference, server, alice, "feedback")
    [theirs], [ours] = await both.runs({"input": {"query": "coffee"}, "stream_mode": ["values", "updates"]})
    assert [list(v) for v in ours["values"]] == [list(v) for v in theirs["values"]]
    assert written(ours["updates"]) == written(theirs["updates"])
    assert ours["values"][-1]["__interrupt__"][0]["value"] == theirs["values"][-1]["__interrupt__"][0]["value"]


async def test_the_messages_of_a_paused_and_resumed_run_are_the_ones_langgraph_server_sends(reference, server, alice):
    both = Both(reference, server, alice, "feedback")
    theirs, ours = await both.runs({"input": {"query": "coffee"}, "stream_mode": "messages"},
                                   {"command": {"resume": {"feedback": "bolder"}}, "stream_mode": "messages"})

    def sent(parts):
        """Each frame's event, with the message's component (metadata) or its type and text."""
        return [(event, *([m["metadata"]["component_id"] for m in data.values()] if event == "messages/metadata"
                          else [(m["type"], m["content"]) for m in data]))
                for event, frames in parts.items() if event != "metadata" for data in frames]
    assert [sent(o) for o in ours] == [sent(t) for t in theirs]
    assert any(event == "messages/partial" for event, *_ in sent(ours[1]))
