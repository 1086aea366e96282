"""Fusion: a chain of pure components runs as one LangGraph node, while the run still reports each component.

Each test compiles a DSL and runs whole turns through the Runner, with fusion on (the default) and off
(`CANVAS2GRAPH_FUSION=0`): what a user sees (the events, the answer, the step trace) must not change.
"""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.compiler.fusion import chains
from canvas2graph.compiler.build import one_at_a_time
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from canvas2graph.runtime.run.steps import atrace
from tests.conftest import cpn
from tests.events import final_content, trace
from tests.nodes.helpers import one_turn as run


def merge(script: str, downstream: list[str], **params) -> dict:
    return cpn("StringTransform", {"method": "merge", "script": script, "delimiters": [","], **params}, downstream)


def chain_dsl() -> dict:
    """begin -> A -> B -> Switch (contains "x"?) -> Message:Y / Message:N."""
    return {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:A"]),
        "StringTransform:A": merge("a-{sys.query}", ["StringTransform:B"]),
        "StringTransform:B": merge("b-{StringTransform:A@result}", ["Switch:S"]),
        "Switch:S": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": ["Message:Y"], "items": [
            {"cpn_id": "StringTransform:B@result", "operator": "contains", "value": "x"}]}], "end_cpn_ids": ["Message:N"]}),
        "Message:Y": cpn("Message", {"content": ["yes {StringTransform:B@result}"]}),
        "Message:N": cpn("Message", {"content": ["no {StringTransform:B@result}"]}),
    }}


def without_times(events: list[dict]) -> list[dict]:
    """The events with what differs between two runs (ids, times) left out."""
    out = []
    for e in events:
        data = {k: v for k, v in e["data"].items() if k not in ("created_at", "elapsed_time")}
        if isinstance(data.get("outputs"), dict):
            data["outputs"] = {k: v for k, v in data["outputs"].items() if k not in ("_created_time", "_elapsed_time")}
        out.append({"event": e["event"], **{k: v for k, v in data.items() if k != "usage"}})
    return out


@pytest.fixture(params=["on", "off"])
def fusion(request, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_FUSION", "1" if request.param == "on" else "0")
    return request.param


def test_a_chain_of_pure_components_ending_in_a_switch_is_one_node():
    compiled = compile_dsl(chain_dsl())
    assert compiled.fused == {"StringTransform.A": ["StringTransform:A", "StringTransform:B", "Switch:S"]}
    nodes = compiled.builder().nodes
    assert "StringTransform.B" not in nodes and "Switch.S" not in nodes
    assert nodes["StringTransform.A"].metadata["fused"] == ["StringTransform:A", "StringTransform:B", "Switch:S"]


def test_fusion_off_keeps_a_node_per_component(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_FUSION", "0")
    compiled = compile_dsl(chain_dsl())
    assert compiled.fused == {}
    assert {"StringTransform.A", "StringTransform.B", "Switch.S"} <= set(compiled.builder().nodes)


async def test_each_fused_component_reports_its_start_and_finish_in_order(fusion):
    events, outcome = await run(chain_dsl(), "x")
    assert outcome.status == "finished"
    assert trace(events)[1:11] == [
        "node_started:begin", "node_finished:begin",
        "node_started:StringTransform:A", "node_finished:StringTransform:A",
        "node_started:StringTransform:B", "node_finished:StringTransform:B",
        "node_started:Switch:S", "node_finished:Switch:S", "node_started:Message:Y", "message"]
    finished = {e["data"]["component_id"]: e["data"] for e in events if e["event"] == "node_finished"}
    assert finished["StringTransform:B"]["inputs"] == {"StringTransform:A@result": "a-x"}
    assert finished["StringTransform:B"]["outputs"]["result"] == "b-a-x"
    assert finished["Switch:S"]["outputs"]["_next"] == ["Message:Y"]
    assert final_content(events) == "yesb-a-x"


async def test_fusion_changes_nothing_a_user_sees(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_FUSION", "1")
    fused, _ = await run(chain_dsl(), "q")
    monkeypatch.setenv("CANVAS2GRAPH_FUSION", "0")
    plain, _ = await run(chain_dsl(), "q")
    assert without_times(fused) == without_times(plain)


async def test_the_step_trace_lists_every_fused_component_as_a_step(fusion):
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(chain_dsl()), saver, ModelFactory())
        [e async for e in runner.run_turn("t", TurnRequest(query="x"))]
        turns = await atrace(runner.graph, {"configurable": {"thread_id": "t"}})
    steps = turns[0]["steps"]
    assert [s["component_id"] for s in steps] == ["begin", "StringTransform:A", "StringTransform:B", "Switch:S", "Message:Y"]
    by_id = {s["component_id"]: s for s in steps}
    assert by_id["StringTransform:B"]["inputs"] == {"StringTransform:A@result": "a-x"}
    assert by_id["StringTransform:B"]["outputs"]["result"] == "b-a-x"


async def test_a_failure_inside_a_chain_names_the_component_that_failed(fusion):
    source = chain_dsl()
    # sys.conversation_turns counts turns: a text cannot go there (a VariableAssigner error at run time)
    source["components"]["StringTransform:B"] = cpn("VariableAssigner", {"variables": [
        {"variable": "sys.conversation_turns", "operator": "set", "parameter": "many"}]}, ["Switch:S"])
    events, outcome = await run(source, "x")
    assert outcome.status == "stopped"
    failed = [e["data"] for e in events if e["event"] == "node_finished" and e["data"]["error"]]
    assert [f["component_id"] for f in failed] == ["StringTransform:B"]


def test_chains_stop_at_joins_handlers_retries_and_parallel_branches():
    source = chain_dsl()
    comps = source["components"]
    comps["StringTransform:B"]["obj"]["params"]["exception_method"] = "comment"
    plan = compile_dsl(source).plan
    assert chains(plan, inline=one_at_a_time(plan)) == {}                   # B has its own error handler
    comps["StringTransform:B"]["obj"]["params"].pop("exception_method")
    comps["begin"]["downstream"] = ["StringTransform:A", "StringTransform:C"]
    comps["StringTransform:C"] = merge("c", ["StringTransform:B"])          # B is a join now
    plan = compile_dsl(source).plan
    assert not one_at_a_time(plan) and chains(plan, inline=one_at_a_time(plan)) == {}
    assert chains(plan, inline=True) == {"StringTransform:B": ["StringTransform:B", "Switch:S"]}


async def test_a_chain_that_ends_the_turn_records_the_answer(fusion):
    source = {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:A"]),
        "StringTransform:A": merge("a-{sys.query}", ["StringTransform:B"]),
        "StringTransform:B": merge("b-{StringTransform:A@result}", []),
    }}
    events, outcome = await run(source, "z")
    assert outcome.status == "finished"
    assert events[-1]["event"] == "workflow_finished"
    assert trace(events)[-3:] == ["node_started:StringTransform:B", "node_finished:StringTransform:B", "workflow_finished"]
