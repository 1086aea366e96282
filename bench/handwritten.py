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
from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel


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


# --------------------------------------------------------------------------------------------
# containers: a counting loop and a map over a list (bench/dsls.py: loop_counter, iteration_map)
# --------------------------------------------------------------------------------------------

class LoopState(TypedDict, total=False):
    query: str
    count: int
    idx: int
    done: bool
    text: str
    history: list


def loop_counter(passes: int = 1000, show_body: bool = False) -> StateGraph:
    """begin -> init (count = 0) -> head -(conditional edge)-> inc -> work -> head ... -> done.

    Per pass the same three steps as the compiled Loop: the head (pass counter, termination test),
    the increment and the work (format the counter; shown through the stream writer if the compiled
    body is a Message). The recursion limit must allow 3 steps per pass: `loop_recursion_limit`.
    """
    async def init(state: LoopState) -> dict:
        return {"count": 0, "idx": 0, "done": False}

    async def head(state: LoopState) -> dict:
        idx = state["idx"]
        done = idx >= passes
        if not done:
            idx += 1
            done = state["count"] >= passes
        return {"idx": idx, "done": done}

    async def inc(state: LoopState) -> dict:
        return {"count": state["count"] + 1}

    async def work(state: LoopState) -> dict:
        text = f"pass {state['count']}"
        if show_body:
            get_stream_writer()({"event": "message", "content": text})
        return {"text": text}

    async def done(state: LoopState) -> dict:
        text = f"done: {state['count']} passes, last {state['text']}"
        get_stream_writer()({"event": "message", "content": text})
        return {"text": text, "history": [*state.get("history", []), ["user", state["query"]], ["assistant", text]]}

    async def route(state: LoopState) -> str:
        return "done" if state["done"] else "inc"

    g = StateGraph(LoopState)
    for name, fn in (("begin", begin), ("init", init), ("head", head), ("inc", inc), ("work", work), ("done", done)):
        g.add_node(name, fn)
    g.add_edge(START, "begin")
    g.add_edge("begin", "init")
    g.add_edge("init", "head")
    g.add_conditional_edges("head", route, {"inc": "inc", "done": "done"})
    g.add_edge("inc", "work")
    g.add_edge("work", "head")
    g.add_edge("done", END)
    return g


def loop_recursion_limit(passes: int) -> int:
    return 3 * (passes + 1) + 10


class MapState(TypedDict, total=False):
    query: str
    items: list
    idx: int
    item: str
    done: bool
    text: str
    results: list
    history: list


def iteration_map() -> StateGraph:
    """begin -> split -> iteration (idx = 0) -> head -(conditional edge)-> wrap -> head ... -> out.

    Per item the same two steps as the compiled Iteration: the head (collects the previous
    result, hands out the next item) and the body (format the item).
    """
    import json

    async def split(state: MapState) -> dict:
        return {"items": state["query"].split(",")}

    async def iteration(state: MapState) -> dict:
        return {"idx": 0, "done": False, "results": None}

    async def head(state: MapState) -> dict:
        idx = state["idx"]
        update: dict = {}
        if idx > 0:
            update["results"] = [*(state.get("results") or []), state["text"]]
        if idx >= len(state["items"]):
            update["done"] = True
            return update
        update.update(idx=idx + 1, item=state["items"][idx])
        return update

    async def wrap(state: MapState) -> dict:
        return {"text": f"<{state['item']}>"}

    async def out(state: MapState) -> dict:
        text = "results: " + json.dumps(state.get("results"), ensure_ascii=False)
        get_stream_writer()({"event": "message", "content": text})
        return {"text": text, "history": [*state.get("history", []), ["user", state["query"]], ["assistant", text]]}

    async def route(state: MapState) -> str:
        return "out" if state.get("done") else "wrap"

    g = StateGraph(MapState)
    for name, fn in (("begin", begin), ("split", split), ("iteration", iteration), ("head", head),
                     ("wrap", wrap), ("out", out)):
        g.add_node(name, fn)
    g.add_edge(START, "begin")
    g.add_edge("begin", "split")
    g.add_edge("split", "iteration")
    g.add_edge("iteration", "head")
    g.add_conditional_edges("head", route, {"wrap": "wrap", "out": "out"})
    g.add_edge("wrap", "head")
    g.add_edge("out", END)
    return g


def iteration_recursion_limit(items: int) -> int:
    return 2 * (items + 1) + 10
