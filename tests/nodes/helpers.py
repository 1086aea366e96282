"""Build single components through the real compiler and run them against a hand-made state."""
from __future__ import annotations

from typing import Any

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.types import RunContext
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest


def canvas(**components: dict) -> dict:
    """A DSL with a Begin plus the given components (`{"Cpn:Id": {"component_name", "params", "downstream"}}`)."""
    comps: dict[str, Any] = {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": list(components)[:1]}}
    for cid, spec in components.items():
        comps[cid] = {"obj": {"component_name": spec["component_name"], "params": spec.get("params", {})},
                      "downstream": spec.get("downstream", [])}
    return {"components": comps}


def build(cid: str, component_name: str, params: dict, **more: dict):
    compiled, diags = diagnose(canvas(**{cid: {"component_name": component_name, "params": params}}, **more))
    assert compiled is not None, [str(d) for d in diags]
    return compiled.plan.nodes[cid]


def errors(component_name: str, params: dict) -> list:
    _, diags = diagnose(canvas(**{"X:1": {"component_name": component_name, "params": params}}))
    return [d for d in diags if d.severity == "error"]


def context(*replies: Any, **script: Any) -> RunContext:
    s = Script.load({"replies": list(replies), **script})
    return RunContext(models=ModelFactory(script=s), script=s)


def state(query: str = "", **outputs: dict) -> dict:
    st: dict[str, Any] = {"globals": {"sys.query": query, "sys.conversation_turns": 1}, "history": [["user", query]]}
    for cid, out in outputs.items():
        st.setdefault("outputs", {})[cid.replace("__", ":")] = out
    return st


async def one_turn(source: dict, query: str = "", *, replies=(), inputs=None):
    """One turn on a fresh in-memory session with scripted replies: (events, outcome)."""
    script = Script.load({"replies": list(replies)})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script)
        events = [e async for e in runner.run_turn("s", TurnRequest(query=query, inputs=inputs))]
    return events, runner.outcome
