"""Memories in a LangGraph user's own store (issue 35): `canvas2graph.compile(dsl, store=...)` and the graph's
Message saves there, its Retrieval reads there, each user's memories apart (`user_id`), driven by LangGraph's own
`ainvoke`."""
from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

import canvas2graph
from canvas2graph import ComponentError, RunContext
from canvas2graph.runtime.services.memory import MemoryBook
from canvas2graph.runtime.services.scripted import Script
from tests.conftest import cpn


def saver(memory_id: str) -> dict:
    return {"components": {
        "begin": cpn("Begin", {}, ["Message:M"]),
        "Message:M": cpn("Message", {"content": ["Noted: {sys.query}"], "memory_ids": [memory_id]}),
    }}


def reader(memory_id: str) -> dict:
    return {"components": {
        "begin": cpn("Begin", {}, ["Retrieval:R"]),
        "Retrieval:R": cpn("Retrieval", {"query": "{sys.query}", "retrieval_from": "memory", "memory_ids": [memory_id],
                                         "user_id": "{sys.user_id}", "empty_response": "nothing"}, ["Message:M"]),
        "Message:M": cpn("Message", {"content": ["Found: {Retrieval:R@formalized_content}"]}),
    }}


async def ask(graph, question: str, user: str, thread: str) -> str:
    out = await graph.ainvoke({"query": question, "user_id": user}, {"configurable": {"thread_id": thread}},
                              context=RunContext(script=Script.load({})))
    return out["answer"]


async def test_the_graphs_store_holds_the_memories_of_each_user_apart():
    store = InMemoryStore()
    memory = await MemoryBook(store).create("notes", ["raw"])
    saving = canvas2graph.compile(saver(memory.id), checkpointer=InMemorySaver(), store=store)
    await ask(saving, "my cat is called Tom", "ann", "t1")
    await ask(saving, "my cat is called Felix", "bob", "t2")
    [ann] = [m for m in await MemoryBook(store).recent([memory.id]) if m.user_id == "ann"]
    assert ann.session_id == "t1" and ann.content.endswith("Noted:my cat is called Tom")

    reading = canvas2graph.compile(reader(memory.id), checkpointer=InMemorySaver(), store=store)
    answer = await ask(reading, "what is my cat called?", "ann", "t3")
    assert "Tom" in answer and "Felix" not in answer
    assert await ask(reading, "what is my cat called?", "carol", "t4") == "Found:nothing"


async def test_a_graph_without_a_store_says_what_it_needs():
    graph = canvas2graph.compile(saver("m1"), checkpointer=InMemorySaver())
    with pytest.raises(ComponentError, match="params.memory_ids: this run has no memory store") as failed:
        await graph.ainvoke({"query": "hello"}, {"configurable": {"thread_id": "t"}},
                            context=RunContext(script=Script.load({})))
    assert failed.value.component_id == "Message:M"


def test_a_retrieval_from_memory_with_no_memory_is_warned_of_at_compile_time():
    from canvas2graph.compiler.canvas import diagnose
    dsl = reader("m1")
    del dsl["components"]["Retrieval:R"]["obj"]["params"]["memory_ids"]
    compiled, diagnostics = diagnose(json.dumps(dsl).encode())
    assert compiled is not None
    assert [(d.code, d.component_id, d.field, d.severity) for d in diagnostics] == [
        ("no-memory", "Retrieval:R", "params.memory_ids", "warning")]
