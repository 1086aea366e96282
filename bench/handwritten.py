"""The benchmark's graphs written by hand in plain LangGraph: the baseline canvas2graph is compared to.

Same nodes and edges as the generated DSLs (bench/dsls.py), a simple TypedDict state, async nodes
doing the equivalent work:
- begin: take the query;
- a Message-like node: format a string from the previous node's output and show it (one
  `message` item through the stream writer, as an app that displays messages would);
- a StringTransform-like node (merge): the same formatting, nothing shown;
- an LLM node: call the same ScriptedChatModel with `ainvoke` on a prompt built from the query;
- the Switch: a node that picks the branch plus a conditional edge with a path map;
- the last node appends the answer to the conversation history.
"""
from __future__ import annotations

from typing import TypedDict

from langchain_core.messages import HumanMessage
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph

from bench.dsls import BRANCHES
from runtime.scripted import Script, ScriptedChatModel


class ChainState(TypedDict, total=False):
    query: str
    text: str
    route: str
    history: list


async def begin(state: ChainState) -> dict:
    return {"text": state["query"]}


def _message_node(label: str, last: bool):
    async def node(state: ChainState) -> dict:
        text = f"{label}<-{state['text']}"
        get_stream_writer()({"event": "message", "content": text})
        update = {"text": text}
        if last:
            update["history"] = [*state.get("history", []), ["user", state["query"]], ["assistant", text]]
        return update
    return node


def _transform_node(label: str, last: bool):
    async def node(state: ChainState) -> dict:
        text = f"{label}<-{state['text']}"
        update = {"text": text}
        if last:
            update["history"] = [*state.get("history", []), ["user", state["query"]], ["assistant", text]]
        return update
    return node


def _llm_node(model: ScriptedChatModel, last: bool):
    async def node(state: ChainState) -> dict:
        message = await model.ainvoke([HumanMessage(content=f"Question: {state['query']}")])
        update = {"text": message.content}
        if last:
            update["history"] = [*state.get("history", []), ["user", state["query"]], ["assistant", message.content]]
        return update
    return node


def _chain(n: int, prefix: str, make_node) -> StateGraph:
    """begin -> {prefix}1 -> ... -> {prefix}{n-1}, each node made by `make_node(name, last)`."""
    g = StateGraph(ChainState)
    g.add_node("begin", begin)
    g.add_edge(START, "begin")
    prev = "begin"
    for i in range(1, n):
        name = f"{prefix}{i}"
        g.add_node(name, make_node(name, i == n - 1))
        g.add_edge(prev, name)
        prev = name
    g.add_edge(prev, END)
    return g


def message_chain(n: int) -> StateGraph:
    """Message-like nodes: format a string from the previous output and show it."""
    return _chain(n, "m", lambda name, last: _message_node(name, last=last))


def transform_chain(n: int) -> StateGraph:
    """StringTransform-like nodes: format a string, show nothing."""
    return _chain(n, "t", lambda name, last: _transform_node(name, last=last))


def llm_chain(n: int, script: Script | None = None) -> StateGraph:
    """LLM nodes, each calling its own ScriptedChatModel (one shared script)."""
    script = script or Script.load({"auto_reply": "reply {n} from {component}"})
    return _chain(n, "l", lambda name, last: _llm_node(
        ScriptedChatModel(script=script, component_id=f"LLM:L{name[1:]}"), last=last))


async def switch(state: ChainState) -> dict:
    query = state["query"].lower()
    route = "a1" if "alpha" in query else "b1" if "beta" in query else "c1"
    return {"route": route}


async def route(state: ChainState) -> str:
    return state["route"]


def branch(chain_len: int = 5) -> StateGraph:
    """begin -> switch -(conditional edge)-> one of 3 chains of `chain_len` Message-like nodes."""
    g = StateGraph(ChainState)
    g.add_node("begin", begin)
    g.add_node("switch", switch)
    g.add_edge(START, "begin")
    g.add_edge("begin", "switch")
    heads = {}
    for b in BRANCHES:
        prev = None
        for i in range(1, chain_len + 1):
            name = f"{b.lower()}{i}"
            g.add_node(name, _message_node(name, last=i == chain_len))
            if prev is None:
                heads[name] = name
            else:
                g.add_edge(prev, name)
            prev = name
        g.add_edge(prev, END)
    g.add_conditional_edges("switch", route, heads)
    return g
