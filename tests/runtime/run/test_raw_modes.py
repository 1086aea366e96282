"""A turn asked for LangGraph's own stream beside RAGFlow's events (`TurnEvents(raw_modes=...)`, what
`/langgraph` streams): RAGFlow's events are the same whichever modes are asked, `events` (the run through
`astream_events`) included, on a plain canvas and on one whose parallel Iteration runs in item graphs."""
from __future__ import annotations

import uuid

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from canvas2graph import RunContext
from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.events import RAW_EVENT, TurnEvents
from canvas2graph.runtime.services.scripted import Script
from tests.runtime.run.test_durable_parallel_iteration import PARALLEL_DSL
from tests.server.helpers import CHAT_DSL, SCRIPT


async def turn(dsl: dict, query: str, raw_modes: list[str] | None, run_id: uuid.UUID | None = None):
    graph = compile_dsl(dsl).graph(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, **({"run_id": run_id} if run_id else {})}
    events = TurnEvents(graph, {"query": query, "inputs": {}}, config, context=RunContext(script=Script.load(SCRIPT)),
                        raw_modes=raw_modes)
    ragflow, raw = [], []
    async for event in events:
        if event["event"] == RAW_EVENT:
            raw.append(event)
            continue
        data = event.get("data") or {}
        outputs = {k: v for k, v in (data.get("outputs") or {}).items() if k not in ("_created_time", "_elapsed_time")}
        ragflow.append((event["event"], data.get("component_id"), data.get("content"), outputs))
    return ragflow, raw, events.status


@pytest.mark.parametrize("dsl, query", [(CHAT_DSL, "Capital of France?"), (PARALLEL_DSL, "a,b,c,d,e")],
                         ids=["chat", "parallel-iteration"])
async def test_ragflows_events_do_not_change_with_the_raw_modes_asked(dsl, query):
    plain, none, status = await turn(dsl, query, None)
    assert none == [] and status == "finished"
    run_id = uuid.uuid4()
    for modes in (["values", "updates", "messages"], ["events", "values"]):
        same, raw, status = await turn(dsl, query, modes, run_id if "events" in modes else None)
        assert same == plain and status == "finished"
        assert {e["mode"] for e in raw} == set(modes)
    events = [e["data"] for e in raw if e["mode"] == "events"]
    assert events[0]["event"] == "on_chain_start" and events[0]["run_id"] == str(run_id)
    assert events[-1]["event"] == "on_chain_end" and events[-1]["run_id"] == str(run_id)
    # the graph's own stream is the other modes', not events
    assert not [e for e in events if e["event"] == "on_chain_stream" and e["run_id"] == str(run_id)]
    assert any(e["event"] == "on_chat_model_stream" for e in events)
