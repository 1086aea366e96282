"""Loop, LoopItem and ExitLoop: repeat the body while the termination condition is false (SPEC 3.9, 5.4).

The condition is checked before every pass, so a Loop behaves like `while not condition`, capped
at `maximum_loop_count` passes. Loop variables are the Loop's outputs; VariableAssigner updates them.
"""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.nodes.loop import ConditionError, holds
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.events import final_content, finished, trace
from tests.nodes.helpers import one_turn as run
from tests.conftest import cpn


# --- helpers ------------------------------------------------------------------------------------


def var(name: str, value, type_: str = "number", mode: str = "constant") -> dict:
    return {"variable": name, "input_mode": mode, "type": type_, "value": value}


def cond(variable: str, operator: str, value, mode: str = "constant") -> dict:
    return {"variable": variable, "operator": operator, "value": value, "input_mode": mode}


def inc(*items) -> dict:
    """A VariableAssigner inside Loop:L applying (variable, operator, parameter) items."""
    return cpn("VariableAssigner", {"variables": [{"variable": v, "operator": op, "parameter": p} for v, op, p in items]},
               parent_id="Loop:L")


def loop_dsl(*, variables=(), conditions=(), logic: str | None = "and", maximum: int = 10, body: dict | None = None,
             first: str = "VariableAssigner:Inc", after: str = "n={Loop:L@n}", begin: dict | None = None) -> dict:
    """begin -> Loop:L (LoopItem:S -> body) -> Message:Out. The default body adds 1 to Loop:L@n."""
    params = {"loop_variables": list(variables), "loop_termination_condition": list(conditions), "maximum_loop_count": maximum}
    if logic is not None:
        params["logical_operator"] = logic
    return {"components": {
        "begin": begin or cpn("Begin", downstream=["Loop:L"]),
        "Loop:L": cpn("Loop", params, ["Message:Out"]),
        "LoopItem:S": cpn("LoopItem", {}, [first], parent_id="Loop:L"),
        **(body if body is not None else {"VariableAssigner:Inc": inc(("Loop:L@n", "+=", 1))}),
        "Message:Out": cpn("Message", {"content": [after]}),
    }}


def passes(events: list[dict]) -> int:
    """Body passes: the LoopItem runs once more than the body (the check that ends the loop)."""
    return len(finished(events, "LoopItem:S")) - 1


# --- when the condition is checked ----------------------------------------------------------------

async def test_the_condition_is_checked_before_the_first_pass():
    source = loop_dsl(variables=[var("n", 5)], conditions=[cond("Loop:L@n", "≥", 3)])
    events, outcome = await run(source)
    assert outcome.status == "finished"
    assert passes(events) == 0 and finished(events, "VariableAssigner:Inc") == []
    assert final_content(events) == "n=5"


async def test_the_loop_repeats_until_the_condition_holds():
    source = loop_dsl(variables=[var("n", 0)], conditions=[cond("Loop:L@n", "≥", 3)])
    events, _ = await run(source)
    assert passes(events) == 3
    assert final_content(events) == "n=3"


async def test_an_empty_condition_list_with_and_gives_zero_passes():
    events, outcome = await run(loop_dsl(variables=[var("n", 0)], logic="and"))
    assert outcome.status == "finished"
    assert passes(events) == 0
    assert final_content(events) == "n=0"


async def test_a_missing_logical_operator_means_and():
    events, _ = await run(loop_dsl(variables=[var("n", 0)], logic=None))
    assert passes(events) == 0


async def test_an_empty_condition_list_with_or_runs_maximum_loop_count_passes():
    events, _ = await run(loop_dsl(variables=[var("n", 0)], logic="or", maximum=4))
    assert passes(events) == 4
    assert final_content(events) == "n=4"


async def test_maximum_loop_count_zero_gives_zero_passes():
    events, _ = await run(loop_dsl(variables=[var("n", 0)], logic="or", maximum=0))
    assert passes(events) == 0
    assert final_content(events) == "n=0"


async def test_maximum_loop_count_caps_a_condition_that_never_holds():
    source = loop_dsl(variables=[var("n", 0)], conditions=[cond("Loop:L@n", "<", 0)], maximum=3)
    events, _ = await run(source)
    assert passes(events) == 3


async def test_and_needs_every_condition_and_or_needs_one():
    both = [cond("Loop:L@n", "≥", 2), cond("Loop:L@m", "≥", 4)]
    body = {"VariableAssigner:Inc": inc(("Loop:L@n", "+=", 1), ("Loop:L@m", "+=", 2))}
    variables = [var("n", 0), var("m", 0)]
    events, _ = await run(loop_dsl(variables=variables, conditions=both, logic="and", body=body))
    assert passes(events) == 2
    both = [cond("Loop:L@n", "≥", 5), cond("Loop:L@m", "≥", 4)]
    events, _ = await run(loop_dsl(variables=variables, conditions=both, logic="or", body=body))
    assert passes(events) == 2


async def test_a_condition_value_may_come_from_a_variable():
    begin = cpn("Begin", {"inputs": {"limit": {"name": "limit", "type": "integer", "optional": False}}}, ["Loop:L"])
    source = loop_dsl(variables=[var("n", 0)], conditions=[cond("Loop:L@n", "≥", "begin@limit", mode="variable")], begin=begin)
    events, _ = await run(source, inputs={"limit": 2})
    assert passes(events) == 2


async def test_the_loop_finishes_after_its_last_item_check_and_before_its_downstream():
    events, _ = await run(loop_dsl(variables=[var("n", 0)], logic="or", maximum=1))
    assert [x for x in trace(events) if x.startswith("node_")] == [
        "node_started:begin", "node_finished:begin",
        "node_started:Loop:L",
        "node_started:LoopItem:S", "node_finished:LoopItem:S",
        "node_started:VariableAssigner:Inc", "node_finished:VariableAssigner:Inc",
        "node_started:LoopItem:S", "node_finished:LoopItem:S",
        "node_finished:Loop:L",
        "node_started:Message:Out", "node_finished:Message:Out"]


async def test_every_turn_starts_the_loop_afresh():
    source = loop_dsl(variables=[var("n", 0)], logic="or", maximum=2)
    script = Script.load([])
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script)
        first = [e async for e in runner.run_turn("s", TurnRequest(query="1"))]
        second = [e async for e in runner.run_turn("s", TurnRequest(query="2"))]
    assert passes(first) == passes(second) == 2
    assert final_content(first) == final_content(second) == "n=2"


# --- loop variables -------------------------------------------------------------------------------

async def test_constant_loop_variables_keep_their_type():
    variables = [var("n", 1.5), var("flag", True, "boolean"), var("name", "x", "string"),
                 var("obj", {"a": 1}, "object"), var("xs", [1, 2], "array<number>")]
    events, _ = await run(loop_dsl(variables=variables))
    outputs = finished(events, "Loop:L")[0]["outputs"]
    assert {k: outputs[k] for k in ("n", "flag", "name", "obj", "xs")} == {
        "n": 1.5, "flag": True, "name": "x", "obj": {"a": 1}, "xs": [1, 2]}


async def test_variable_mode_loop_variables_read_a_reference():
    begin = cpn("Begin", {"inputs": {"start": {"name": "start", "type": "integer", "optional": False}}}, ["LLM:Pick"])
    source = loop_dsl(variables=[var("q", "sys.query", "string", "variable"), var("start", "begin@start", mode="variable"),
                                 var("braced", "{LLM:Pick@content}", "string", "variable")],
                      after="{Loop:L@q} {Loop:L@start} {Loop:L@braced}", begin=begin)
    source["components"]["LLM:Pick"] = cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "pick"}]}, ["Loop:L"])
    events, _ = await run(source, "hello", replies=["picked"], inputs={"start": 7})
    outputs = finished(events, "Loop:L")[0]["outputs"]
    assert (outputs["q"], outputs["start"], outputs["braced"]) == ("hello", 7, "picked")


async def test_variable_assigner_updates_loop_variables_and_the_last_values_are_visible_after_the_loop():
    body = {"VariableAssigner:Inc": inc(("Loop:L@n", "+=", 1), ("Loop:L@text", "set", "{Loop:L@text}+"))}
    source = loop_dsl(variables=[var("n", 0), var("text", "go", "string")], conditions=[cond("Loop:L@n", "=", 3)],
                      body=body, after="{Loop:L@n}/{Loop:L@text}")
    events, _ = await run(source)
    assert finished(events, "Loop:L")[0]["outputs"]["n"] == 3
    assert finished(events, "Loop:L")[0]["outputs"]["text"] == "go+++"
    assert final_content(events) == "3/go+++"


async def test_body_components_see_the_current_values_on_each_pass():
    body = {"StringTransform:Show": cpn("StringTransform", {"method": "merge", "script": "pass {Loop:L@n}"},
                                        ["VariableAssigner:Inc"], parent_id="Loop:L"),
            "VariableAssigner:Inc": inc(("Loop:L@n", "+=", 1))}
    source = loop_dsl(variables=[var("n", 0)], conditions=[cond("Loop:L@n", "≥", 3)], body=body, first="StringTransform:Show")
    events, _ = await run(source)
    assert [f["outputs"]["result"] for f in finished(events, "StringTransform:Show")] == ["pass 0", "pass 1", "pass 2"]


async def test_a_body_with_branches_of_unequal_length_finishes_each_pass_before_the_next():
    body = {"StringTransform:A": cpn("StringTransform", {"method": "merge", "script": "a"}, ["StringTransform:C"], parent_id="Loop:L"),
            "StringTransform:C": cpn("StringTransform", {"method": "merge", "script": "c{Loop:L@n}"}, parent_id="Loop:L"),
            "VariableAssigner:Inc": inc(("Loop:L@n", "+=", 1))}
    source = loop_dsl(variables=[var("n", 0)], logic="or", maximum=2, body=body)
    source["components"]["LoopItem:S"]["downstream"] = ["StringTransform:A", "VariableAssigner:Inc"]
    events, outcome = await run(source)
    assert outcome.status == "finished"
    assert passes(events) == 2
    assert len(finished(events, "StringTransform:C")) == 2
    assert trace(events).count("workflow_finished") == 1
    assert len(finished(events, "Message:Out")) == 1 and final_content(events) == "n=2"


# --- ExitLoop ---------------------------------------------------------------------------------------

def exit_loop_dsl() -> dict:
    """Adds 1 to n each pass; a Switch leaves through ExitLoop once n reaches 2 (the cap is 10)."""
    body = {
        "VariableAssigner:Inc": cpn("VariableAssigner", {"variables": [{"variable": "Loop:L@n", "operator": "+=", "parameter": 1}]},
                                    ["Switch:Check"], parent_id="Loop:L"),
        "Switch:Check": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": ["ExitLoop:X"], "items": [
            {"cpn_id": "Loop:L@n", "operator": "≥", "value": "2"}]}], "end_cpn_ids": ["StringTransform:Again"]},
            ["ExitLoop:X", "StringTransform:Again"], parent_id="Loop:L"),
        "ExitLoop:X": cpn("ExitLoop", {}, parent_id="Loop:L"),
        "StringTransform:Again": cpn("StringTransform", {"method": "merge", "script": "again"}, parent_id="Loop:L"),
    }
    return loop_dsl(variables=[var("n", 0)], logic="or", maximum=10, body=body)


async def test_exit_loop_leaves_before_the_maximum_and_continues_after_the_loop():
    events, outcome = await run(exit_loop_dsl())
    assert outcome.status == "finished"
    assert len(finished(events, "VariableAssigner:Inc")) == 2
    assert len(finished(events, "StringTransform:Again")) == 1
    assert len(finished(events, "ExitLoop:X")) == 1
    assert len(finished(events, "LoopItem:S")) == 2          # no closing check after ExitLoop
    assert final_content(events) == "n=2"


async def test_a_loop_left_through_exit_loop_still_reports_node_finished_unlike_ragflow():
    # RAGFlow never emits node_finished for a Loop left through ExitLoop (SPEC 10.5); we do
    events, _ = await run(exit_loop_dsl())
    t = trace(events)
    assert t.count("node_finished:Loop:L") == 1
    assert t.index("node_finished:ExitLoop:X") < t.index("node_finished:Loop:L") < t.index("node_started:Message:Out")
    assert finished(events, "Loop:L")[0]["outputs"]["n"] == 2


async def test_an_exit_loop_nested_in_an_iteration_leaves_the_enclosing_loop_and_finishes_both():
    source = {"components": {
        "begin": cpn("Begin", downstream=["Loop:L"]),
        "Loop:L": cpn("Loop", {"loop_variables": [var("n", 0)], "loop_termination_condition": [], "logical_operator": "or",
                               "maximum_loop_count": 5}, ["Message:Out"]),
        "LoopItem:S": cpn("LoopItem", {}, ["VariableAssigner:Inc"], parent_id="Loop:L"),
        "VariableAssigner:Inc": cpn("VariableAssigner", {"variables": [{"variable": "Loop:L@n", "operator": "+=", "parameter": 1}]},
                                    ["Iteration:I"], parent_id="Loop:L"),
        "Iteration:I": cpn("Iteration", {"items_ref": "Loop:L@xs"}, parent_id="Loop:L"),
        "IterationItem:IS": cpn("IterationItem", {}, ["ExitLoop:X"], parent_id="Iteration:I"),
        "ExitLoop:X": cpn("ExitLoop", {}, parent_id="Iteration:I"),
        "Message:Out": cpn("Message", {"content": ["n={Loop:L@n}"]}),
    }}
    source["components"]["Loop:L"]["obj"]["params"]["loop_variables"].append(var("xs", ["a", "b"], "array<string>"))
    events, outcome = await run(source)
    assert outcome.status == "finished"
    assert len(finished(events, "ExitLoop:X")) == 1
    assert len(finished(events, "IterationItem:IS")) == 1          # the second item is never reached
    t = trace(events)
    assert t.index("node_finished:ExitLoop:X") < t.index("node_finished:Iteration:I") < t.index("node_finished:Loop:L")
    assert t.count("node_finished:Iteration:I") == 1 and t.count("node_finished:Loop:L") == 1
    assert final_content(events) == "n=1"


# --- operators ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("operator, left, right, expected", [
    # str
    ("contains", "hello", "ell", True), ("contains", "hello", "xyz", False),
    ("not contains", "hello", "xyz", True), ("not contains", "hello", "ell", False),
    ("start with", "hello", "he", True), ("start with", "hello", "lo", False),
    ("end with", "hello", "lo", True), ("end with", "hello", "he", False),
    ("is", "hello", "hello", True), ("is", "hello", "Hello", False),
    ("is not", "hello", "Hello", True), ("is not", "hello", "hello", False),
    ("empty", "", None, True), ("empty", "x", None, False),
    ("not empty", "x", None, True), ("not empty", "", None, False),
    # bool: identity with the value
    ("is", True, True, True), ("is", True, False, False), ("is", True, "true", False),
    ("is not", False, True, True), ("is not", False, False, False),
    ("empty", False, None, True), ("not empty", True, None, True),
    # numbers: raw comparison with the value
    ("=", 3, 3, True), ("=", 3, 4, False), ("=", 3, "3", False),
    ("≠", 3, 4, True), ("≠", 3, 3, False),
    (">", 3, 2, True), (">", 3, 3, False),
    ("<", 2.5, 3, True), ("<", 3, 3, False),
    ("≥", 3, 3, True), ("≥", 2, 3, False),
    ("≤", 3, 3, True), ("≤", 4, 3, False),
    ("empty", 5, None, False), ("not empty", 5, None, True),
    # dict
    ("empty", {}, None, True), ("empty", {"a": 1}, None, False),
    ("not empty", {"a": 1}, None, True), ("not empty", {}, None, False),
    # list
    ("contains", ["a", "b"], "a", True), ("contains", ["a", "b"], "c", False),
    ("not contains", ["a", "b"], "c", True), ("not contains", ["a"], "a", False),
    ("is", [1, 2], [1, 2], True), ("is", [1, 2], [2, 1], False),
    ("is not", [1, 2], [2, 1], True), ("is not", [1], [1], False),
    ("empty", [], None, True), ("not empty", [0], None, True), ("not empty", [], None, False),
    # None: only "empty" holds
    ("empty", None, None, True), ("not empty", None, None, False), ("=", None, None, False),
    ("contains", None, "x", False), (">", None, 1, False),
])
def test_holds_by_operator_and_value_type(operator, left, right, expected):
    assert holds(operator, left, right) is expected


@pytest.mark.parametrize("operator, left, right", [
    (">", "abc", 1),               # str: no ordering operators
    ("=", "abc", "abc"),           # str uses "is", not "="
    ("≠", "abc", "x"),
    ("contains", True, True),      # bool: only is / is not / empty / not empty
    ("=", True, True),
    (">", 3, "2"),                 # number against a string value: not comparable
    ("≤", 3, None),
    ("contains", 3, 3),            # number: no text operators
    ("is", 3, 3),
    ("is", {"a": 1}, {"a": 1}),    # dict: only empty / not empty
    ("contains", {"a": 1}, "a"),
    (">", [1], [0]),               # list: no ordering operators
    ("start with", ["a"], "a"),
    ("unknown", "abc", "a"),
])
def test_holds_raises_for_combinations_ragflow_rejects(operator, left, right):
    with pytest.raises(ConditionError):
        holds(operator, left, right)


# --- failures -----------------------------------------------------------------------------------------

async def test_a_condition_that_cannot_be_evaluated_is_an_error_of_the_loop_item_and_stops_the_turn():
    source = loop_dsl(variables=[var("text", "abc", "string")], conditions=[cond("Loop:L@text", ">", 3)])
    events, outcome = await run(source)
    assert outcome.status == "stopped"
    failure = finished(events, "LoopItem:S")
    assert len(failure) == 1 and failure[0]["error"]
    assert "Loop:L@text" in failure[0]["error"] and "'>'" in failure[0]["error"]
    assert failure[0]["outputs"]["_ERROR"] == failure[0]["error"]
    assert finished(events, "VariableAssigner:Inc") == [] and finished(events, "Message:Out") == []
    assert "workflow_finished" not in trace(events)


async def test_a_failed_condition_leaves_the_session_usable():
    source = loop_dsl(variables=[var("text", "abc", "string")], conditions=[cond("Loop:L@text", ">", 3)])
    script = Script.load([])
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script)
        [e async for e in runner.run_turn("s", TurnRequest(query="1"))]
        again = [e async for e in runner.run_turn("s", TurnRequest(query="2"))]
    assert again[0]["event"] == "workflow_started"
    assert runner.outcome.status == "stopped"          # the same defect fails the next turn the same way


@pytest.mark.parametrize("variables, field", [
    ([var("", "", "string")], "params.loop_variables"),                      # all.json's empty variable
    ([{"variable": "n", "input_mode": "constant", "value": 1}], "params.loop_variables"),
    ([var("n", None)], "params.loop_variables"),
    ([var("n", "", "string", "variable")], "params.loop_variables"),
    ([var("n", 1, "number", "magic")], "params.loop_variables"),
])
def test_an_incomplete_loop_variable_is_a_compile_error(variables, field):
    compiled, diags = diagnose(loop_dsl(variables=variables))
    assert compiled is None
    assert [(d.code, d.component_id, d.field) for d in diags if d.severity == "error"] == [("invalid-param", "Loop:L", field)]


def test_a_termination_condition_without_variable_or_operator_is_a_compile_error():
    compiled, diags = diagnose(loop_dsl(variables=[var("n", 0)], conditions=[{"variable": "Loop:L@n", "value": 1}]))
    assert compiled is None
    assert any(d.component_id == "Loop:L" and d.field == "params.loop_termination_condition" for d in diags)


# --- recursion limit ------------------------------------------------------------------------------------

def test_the_recursion_limit_grows_with_maximum_loop_count():
    small = compile_dsl(loop_dsl(variables=[var("n", 0)], logic="or", maximum=10)).recursion_limit
    big = compile_dsl(loop_dsl(variables=[var("n", 0)], logic="or", maximum=1000)).recursion_limit
    assert small >= 2 * 10 and big >= 2 * 1000
    assert big > small


def test_nested_containers_multiply_the_recursion_limit():
    inner = loop_dsl(variables=[var("n", 0)], logic="or", maximum=20)
    outer = {"components": {
        "begin": cpn("Begin", downstream=["Loop:O"]),
        "Loop:O": cpn("Loop", {"loop_variables": [], "loop_termination_condition": [], "logical_operator": "or",
                               "maximum_loop_count": 30}, ["Message:Out"]),
        "LoopItem:OS": cpn("LoopItem", {}, ["Loop:L"], parent_id="Loop:O"),
        "Loop:L": cpn("Loop", {"loop_variables": [var("n", 0)], "loop_termination_condition": [], "logical_operator": "or",
                               "maximum_loop_count": 20}, parent_id="Loop:O"),
        "LoopItem:S": cpn("LoopItem", {}, ["VariableAssigner:Inc"], parent_id="Loop:L"),
        "VariableAssigner:Inc": inc(("Loop:L@n", "+=", 1)),
        "Message:Out": cpn("Message", {"content": ["n={Loop:L@n}"]}),
    }}
    # 30 outer passes x 20 inner passes x 2 steps (LoopItem, VariableAssigner) per inner pass
    assert compile_dsl(outer).recursion_limit >= 30 * 20 * 2
    assert compile_dsl(outer).recursion_limit > 30 * compile_dsl(inner).recursion_limit // 2


async def test_nested_loops_run_the_inner_loop_on_every_outer_pass():
    outer = {"components": {
        "begin": cpn("Begin", downstream=["Loop:O"]),
        "Loop:O": cpn("Loop", {"loop_variables": [var("total", 0)], "loop_termination_condition": [], "logical_operator": "or",
                               "maximum_loop_count": 3}, ["Message:Out"]),
        "LoopItem:OS": cpn("LoopItem", {}, ["Loop:L"], parent_id="Loop:O"),
        "Loop:L": cpn("Loop", {"loop_variables": [var("n", 0)], "loop_termination_condition": [cond("Loop:L@n", "≥", 2)],
                               "maximum_loop_count": 10}, parent_id="Loop:O"),
        "LoopItem:S": cpn("LoopItem", {}, ["VariableAssigner:Inc"], parent_id="Loop:L"),
        "VariableAssigner:Inc": inc(("Loop:L@n", "+=", 1), ("Loop:O@total", "+=", 1)),
        "Message:Out": cpn("Message", {"content": ["{Loop:O@total}"]}),
    }}
    events, outcome = await run(outer)
    assert outcome.status == "finished"
    assert len(finished(events, "Loop:L")) == 3
    assert final_content(events) == "6"


async def test_a_200_pass_loop_runs_within_the_derived_recursion_limit():
    source = loop_dsl(variables=[var("n", 0)], conditions=[cond("Loop:L@n", "≥", 200)], maximum=200)
    events, outcome = await run(source)
    assert outcome.status == "finished", outcome.error
    assert passes(events) == 200
    assert final_content(events) == "n=200"
