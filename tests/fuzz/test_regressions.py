"""Every failure the fuzzers found (issue 12), kept as an example that must stay fixed.

Each test is the minimal input a generator shrank to, checked with the same properties (which bound
time: a hang fails the test instead of stalling it).
"""
from __future__ import annotations

import json

import pytest

from canvas2graph.compiler.canvas import diagnose
from tests.fuzz.cli import run_cli
from tests.fuzz.properties import check_compile, check_run
from tests.fuzz.seeds import BUILT_IN, cpn, inc, message

SCRIPT = {"auto_reply": "ok"}
NEVER = [{"variable": "Loop:L@n", "operator": "=", "value": -1, "input_mode": "constant"}]    # a loop runs on


def codes(doc) -> dict[str, set[str]]:
    """component id (or field) -> the codes of its diagnostics."""
    _, diags = diagnose(doc)
    found: dict[str, set[str]] = {}
    for d in diags:
        found.setdefault(d.component_id or d.field or "", set()).add(d.code)
    return found


def canvas(**components) -> dict:
    return {"components": {"begin": cpn("Begin", {}, [next(iter(components))]), **components}}


def stopped_with(doc: dict, query: str = "q") -> str:
    """Run one turn; it must stop, and its reason is returned."""
    import asyncio
    from langgraph.checkpoint.memory import InMemorySaver
    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script
    from canvas2graph.runtime.run.runner import Runner, TurnRequest
    compiled = check_compile(doc)
    script = Script.load(SCRIPT)
    runner = Runner(compiled, InMemorySaver(), ModelFactory(script=script), script)

    async def go():
        async for _ in runner.run_turn("s", TurnRequest(query=query)):
            pass
    asyncio.run(go())
    assert runner.outcome.status == "stopped", runner.outcome
    return runner.outcome.error


# --- compile: hangs -----------------------------------------------------------------------------
def test_text_full_of_braces_or_spaces_compiles_without_a_quadratic_scan():
    doc = canvas(**{"Message:A": cpn("Message", message("{" * 200_000, " " * 200_000, "{ " * 100_000))})
    assert check_compile(doc) is not None


@pytest.mark.parametrize("name", ["Loop", "Iteration", "ExitLoop", "Message"])
def test_a_component_that_is_its_own_parent_is_diagnosed(name):
    doc = canvas(**{f"{name}:A": cpn(name, {}, parent="") | {"parent_id": f"{name}:A"}})
    assert "parent-cycle" in codes(doc)[f"{name}:A"]


def test_containers_inside_each_other_both_ways_are_diagnosed():
    doc = canvas(**{"Loop:A": cpn("Loop", {}, parent="Iteration:B"), "Iteration:B": cpn("Iteration", {}, parent="Loop:A")})
    found = codes(doc)
    assert "parent-cycle" in found["Loop:A"] and "parent-cycle" in found["Iteration:B"]


# --- compile: crashes ---------------------------------------------------------------------------
@pytest.mark.parametrize("cid", ["__start__", "__end__", "__input__", "__interrupt__", "__canvas_finish__",
                                 "__error_handler__Message:A", "a|b"])
def test_ids_langgraph_reserves_still_compile_to_a_graph(cid):
    doc = canvas(**{"Message:A": cpn("Message", message("x") | {"exception_method": "goto", "exception_goto": [cid]},
                                     [cid]), cid: cpn("Message", message("y"))})
    assert check_compile(doc) is not None


def test_an_integer_longer_than_python_reads_is_invalid_json():
    _, [d] = diagnose('{"components": {"begin": ' + "7" * 5000 + "}}")
    assert d.code == "invalid-json" and "4300 digits" in d.message


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 10 ** 30, [1], {"a": 1}, -1, True])
def test_a_system_global_of_the_wrong_type_or_size_is_named(value):
    doc = canvas(**{"Message:A": cpn("Message", message("x"))})
    doc["globals"] = {"sys.conversation_turns": value}
    found = codes(doc)
    assert found.get("globals.sys.conversation_turns", set()) & {"bad-global", "bad-number"}


def test_numbers_no_session_can_store_are_named_by_component_and_field():
    doc = canvas(**{"Loop:L": cpn("Loop", {"maximum_loop_count": 10 ** 30, "x": float("nan")})})
    _, diags = diagnose(doc)
    assert {(d.component_id, d.field, d.code) for d in diags} >= {
        ("Loop:L", "params.maximum_loop_count", "bad-number"), ("Loop:L", "params.x", "bad-number")}


def test_lone_surrogates_in_a_dsl_are_replaced_with_a_warning_and_never_printed():
    doc = canvas(**{"Message:A": cpn("Message", message("hi \ud800 {sys.query}"))})
    doc["graph"] = {"nodes": [{"id": "Message:A", "data": {"name": "A\udc00"}}]}
    compiled = check_compile(doc)
    assert [d.code for d in compiled.diagnostics] == ["not-unicode", "not-unicode"]
    assert check_run(doc, "q\ud800", SCRIPT) == ["finished"]


# --- compile: what used to hang or stall a run -------------------------------------------------------
def test_a_body_component_wired_outside_its_container_is_diagnosed():
    doc = json.loads(json.dumps(BUILT_IN["loop"]))
    doc["components"]["VariableAssigner:Grow"]["downstream"] = ["Message:Out"]
    assert "crosses-container" in codes(doc)["VariableAssigner:Grow"]


def test_a_container_leading_into_its_own_body_is_diagnosed():
    doc = json.loads(json.dumps(BUILT_IN["iteration"]))
    doc["components"]["Iteration:I"]["downstream"] = ["StringTransform:Fmt"]
    assert "crosses-container" in codes(doc)["Iteration:I"]


def test_an_iteration_with_an_empty_body_finishes_its_turn():
    doc = json.loads(json.dumps(BUILT_IN["iteration"]))
    doc["components"]["IterationItem:S"]["downstream"] = []
    assert "empty-body" in codes(doc)["IterationItem:S"]
    assert check_run(doc, "a,b", SCRIPT) == ["finished"]


# --- runs ----------------------------------------------------------------------------------------
def test_form_inputs_no_session_can_store_are_refused_before_the_turn():
    assert check_run(BUILT_IN["form"], "q", SCRIPT, {"feedback": {"value": [10 ** 30]}}) == ["refused"]


def test_a_loop_that_multiplies_past_64_bits_stops_naming_the_component():
    doc = json.loads(json.dumps(BUILT_IN["loop"]))
    doc["components"]["VariableAssigner:Inc"]["obj"]["params"] = inc("Loop:L@n", "*=", 10 ** 9)
    doc["components"]["Loop:L"]["obj"]["params"]["loop_variables"][0]["value"] = 1
    doc["components"]["Loop:L"]["obj"]["params"]["loop_termination_condition"] = NEVER
    doc["components"]["Loop:L"]["obj"]["params"]["maximum_loop_count"] = 5
    assert stopped_with(doc).startswith("VariableAssigner:Inc: output") and "64 bits" in stopped_with(doc)


def test_a_loop_that_doubles_a_text_stops_at_the_size_bound(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_MAX_OUTPUT_CHARS", "100000")
    doc = json.loads(json.dumps(BUILT_IN["loop"]))
    doc["components"]["Switch:Stop"]["obj"]["params"]["conditions"][0]["items"][0]["value"] = "-1"
    doc["components"]["VariableAssigner:Grow"]["obj"]["params"] = inc("Loop:L@text", "set", "{Loop:L@text}{Loop:L@text}")
    doc["components"]["Loop:L"]["obj"]["params"]["loop_termination_condition"] = NEVER
    doc["components"]["Loop:L"]["obj"]["params"]["maximum_loop_count"] = 60
    assert "CANVAS2GRAPH_MAX_OUTPUT_CHARS" in stopped_with(doc, "ab")


@pytest.mark.parametrize("script, bound", [
    ("{{ 'x' * 1000000000 }}", "CANVAS2GRAPH_MAX_OUTPUT_CHARS"),
    ("{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}{% endfor %}", "CANVAS2GRAPH_TEMPLATE_SECONDS"),
])
def test_a_jinja_bomb_stops_naming_the_bound(monkeypatch, script, bound):
    monkeypatch.setenv("CANVAS2GRAPH_TEMPLATE_SECONDS", "0.5")
    for family, params in (("StringTransform", {"method": "merge", "script": script, "delimiters": [","]}),
                           ("Message", {"content": [script], "stream": False})):
        assert bound in stopped_with(canvas(**{f"{family}:J": cpn(family, params)}))


# --- the command line ------------------------------------------------------------------------------
def test_a_file_name_that_is_no_text_is_a_usage_error():
    assert run_cli(["compile", "\ud800"]) == "2"


def test_a_misspelt_component_gets_a_suggestion_and_no_knock_on_warnings():
    doc = json.loads(json.dumps(BUILT_IN["route"]))
    doc["components"]["Categorize:C"]["obj"]["component_name"] = "Categorise"
    _, diags = diagnose(doc)
    assert [(d.code, d.component_id) for d in diags] == [("unknown-component", "Categorize:C")]
    assert "did you mean 'Categorize'?" in diags[0].message
