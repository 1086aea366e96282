"""Iteration and IterationItem: the body runs once per item of a list (SPEC 3.8, 5.4).

Each test compiles a small DSL and runs whole turns through the Runner, so what is checked is
what a user sees: the event stream and the values that reach downstream components.
"""
from __future__ import annotations

from canvas2graph.compiler.canvas import compile_dsl
from tests.events import final_content, finished, trace
from tests.nodes.helpers import one_turn as run
from tests.conftest import cpn


# --- helpers ------------------------------------------------------------------------------------


def split(text_ref: str = "sys.query", downstream: str = "Iteration:I") -> dict:
    """A StringTransform that splits `text_ref` on commas into `StringTransform:Split@result`."""
    return cpn("StringTransform", {"method": "split", "split_ref": text_ref, "delimiters": [","]}, [downstream])


def merge(script: str, parent: str, downstream: list | None = None) -> dict:
    return cpn("StringTransform", {"method": "merge", "script": script, "delimiters": [","]}, downstream, parent_id=parent)


def iteration_dsl(body: dict, *, collect: dict | None = None, items_ref: str = "StringTransform:Split@result",
                  first: str = "StringTransform:Fmt", after: str = "Collected: {Iteration:I@out}") -> dict:
    """begin -> Split(sys.query) -> Iteration:I (IterationItem:S -> body...) -> Message:Out."""
    return {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:Split"]),
        "StringTransform:Split": split(),
        "Iteration:I": cpn("Iteration", {"items_ref": items_ref,
                                         "outputs": collect if collect is not None else {"out": {"ref": f"{first}@result", "type": "Array<string>"}}},
                           ["Message:Out"]),
        "IterationItem:S": cpn("IterationItem", {}, [first], parent_id="Iteration:I"),
        **body,
        "Message:Out": cpn("Message", {"content": [after]}),
    }}


# --- collecting outputs -------------------------------------------------------------------------

async def test_each_pass_appends_the_declared_child_output_to_the_iteration_output():
    source = iteration_dsl({"StringTransform:Fmt": merge("<{IterationItem:S@item}>", "Iteration:I")})
    events, outcome = await run(source, "a,b,c")
    assert outcome.status == "finished"
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["<a>", "<b>", "<c>"]
    assert final_content(events) == 'Collected:["<a>", "<b>", "<c>"]'


async def test_several_declared_outputs_collect_side_by_side():
    source = iteration_dsl(
        {"StringTransform:Fmt": merge("<{IterationItem:S@item}>", "Iteration:I", ["StringTransform:Up"]),
         "StringTransform:Up": merge("#{IterationItem:S@index}", "Iteration:I")},
        collect={"out": {"ref": "StringTransform:Fmt@result"}, "idx": {"ref": "StringTransform:Up@result"}})
    events, _ = await run(source, "x,y")
    outputs = finished(events, "Iteration:I")[0]["outputs"]
    assert outputs["out"] == ["<x>", "<y>"]
    assert outputs["idx"] == ["#0", "#1"]


async def test_the_item_outputs_item_index_and_the_legacy_alias_result():
    source = iteration_dsl({"StringTransform:Fmt": merge("{IterationItem:S@index}", "Iteration:I")})
    events, _ = await run(source, "p,q")
    passes = [f["outputs"] for f in finished(events, "IterationItem:S")]
    assert [{k: o[k] for k in ("item", "result", "index")} for o in passes[:2]] == [
        {"item": "p", "result": "p", "index": 0}, {"item": "q", "result": "q", "index": 1}]


async def test_item_and_index_aliases_read_the_iteration_item_in_body_text():
    body = {"Message:Fmt": cpn("Message", {"content": ["{index}={item}"], "stream": False}, parent_id="Iteration:I")}
    source = iteration_dsl(body, first="Message:Fmt", collect={"out": {"ref": "Message:Fmt@content"}})
    events, _ = await run(source, "red,green")
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["0=red", "1=green"]


async def test_item_alias_in_an_llm_prompt_is_sent_to_the_model():
    body = {"LLM:Describe": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "Describe {item} (#{index})"}]},
                                parent_id="Iteration:I")}
    source = iteration_dsl(body, first="LLM:Describe", collect={"out": {"ref": "LLM:Describe@content"}})
    events, _ = await run(source, "apple,kiwi", replies=["Red.", "Green."])
    started = [e["data"]["thoughts"] for e in events if e["event"] == "node_started" and e["data"]["component_id"] == "LLM:Describe"]
    assert "Describe apple (#0)" in started[0] and "Describe kiwi (#1)" in started[1]
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["Red.", "Green."]


async def test_a_list_of_objects_hands_out_each_object_as_the_item():
    source = {"components": {
        "begin": cpn("Begin", {"inputs": {"rows": {"name": "rows", "type": "object", "optional": False}}}, ["Iteration:I"]),
        "Iteration:I": cpn("Iteration", {"items_ref": "begin@rows", "outputs": {"out": {"ref": "StringTransform:Fmt@result"}}},
                           ["Message:Out"]),
        "IterationItem:S": cpn("IterationItem", {}, ["StringTransform:Fmt"], parent_id="Iteration:I"),
        "StringTransform:Fmt": merge("{IterationItem:S@item}", "Iteration:I"),
        "Message:Out": cpn("Message", {"content": ["{Iteration:I@out}"]}),
    }}
    events, _ = await run(source, inputs={"rows": {"type": "object", "value": '[{"a": 1}, {"a": 2}]'}})
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ['{"a": 1}', '{"a": 2}']


# --- empty and wrong inputs ---------------------------------------------------------------------

async def test_an_empty_list_runs_no_pass_and_leaves_collected_outputs_none():
    source = iteration_dsl({"StringTransform:Fmt": merge("<{IterationItem:S@item}>", "Iteration:I")},
                           items_ref="begin@list", after="Done: {Iteration:I@out}")
    source["components"]["begin"] = cpn("Begin", {"inputs": {"list": {"name": "l", "type": "object", "optional": True}}},
                                        ["StringTransform:Split"])
    events, outcome = await run(source, inputs={"list": []})
    assert outcome.status == "finished"
    assert finished(events, "StringTransform:Fmt") == []
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] is None
    assert len(finished(events, "IterationItem:S")) == 1          # n + 1 with n = 0
    assert final_content(events) == "Done:"


async def test_items_ref_that_is_not_a_list_is_a_component_error_naming_it():
    source = iteration_dsl({"StringTransform:Fmt": merge("x", "Iteration:I")}, items_ref="sys.query")
    events, outcome = await run(source, "not a list")
    assert outcome.status == "stopped"
    failure = finished(events, "Iteration:I")
    assert len(failure) == 1
    assert "sys.query" in failure[0]["error"] and "list" in failure[0]["error"]
    assert failure[0]["outputs"]["_ERROR"] == failure[0]["error"]
    assert "node_started:IterationItem:S" not in trace(events)
    assert "workflow_finished" not in trace(events)


async def test_more_items_than_the_limit_is_a_component_error(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_MAX_ITEMS", "2")
    source = iteration_dsl({"StringTransform:Fmt": merge("{IterationItem:S@item}", "Iteration:I")})
    events, outcome = await run(source, "a,b,c")
    assert outcome.status == "stopped"
    assert "CANVAS2GRAPH_MAX_ITEMS" in finished(events, "Iteration:I")[0]["error"]


def test_the_item_limit_bounds_the_recursion_limit(monkeypatch):
    source = iteration_dsl({"StringTransform:Fmt": merge("{IterationItem:S@item}", "Iteration:I")})
    compiled = compile_dsl(source)
    monkeypatch.setenv("CANVAS2GRAPH_MAX_ITEMS", "10")
    small = compiled.recursion_limit
    monkeypatch.setenv("CANVAS2GRAPH_MAX_ITEMS", "1000")
    assert compiled.recursion_limit > small >= 10 * 2


# --- event order --------------------------------------------------------------------------------

async def test_iteration_item_reports_n_plus_one_passes_and_the_iteration_finishes_after_the_last():
    source = iteration_dsl({"StringTransform:Fmt": merge("{IterationItem:S@item}", "Iteration:I")})
    events, _ = await run(source, "a,b")
    t = [x for x in trace(events) if x.startswith("node_")]
    assert t == [
        "node_started:begin", "node_finished:begin",
        "node_started:StringTransform:Split", "node_finished:StringTransform:Split",
        "node_started:Iteration:I",
        "node_started:IterationItem:S", "node_finished:IterationItem:S",
        "node_started:StringTransform:Fmt", "node_finished:StringTransform:Fmt",
        "node_started:IterationItem:S", "node_finished:IterationItem:S",
        "node_started:StringTransform:Fmt", "node_finished:StringTransform:Fmt",
        "node_started:IterationItem:S", "node_finished:IterationItem:S",
        "node_finished:Iteration:I",
        "node_started:Message:Out", "node_finished:Message:Out"]


async def test_the_iteration_announces_how_many_items_it_will_process():
    source = iteration_dsl({"StringTransform:Fmt": merge("x", "Iteration:I")})
    events, _ = await run(source, "a,b,c")
    started = next(e["data"] for e in events if e["event"] == "node_started" and e["data"]["component_id"] == "Iteration:I")
    assert started["thoughts"] == "Need to process 3 items."


async def test_the_closing_pass_of_the_item_repeats_the_last_item_as_ragflow_does():
    source = iteration_dsl({"StringTransform:Fmt": merge("x", "Iteration:I")})
    events, _ = await run(source, "a,b")
    last = finished(events, "IterationItem:S")[-1]["outputs"]
    assert (last["item"], last["index"]) == ("b", 1)


async def test_a_body_with_several_components_runs_them_in_order_each_pass():
    source = iteration_dsl(
        {"StringTransform:Fmt": merge("[{IterationItem:S@item}]", "Iteration:I", ["StringTransform:Twice"]),
         "StringTransform:Twice": merge("{StringTransform:Fmt@result}{StringTransform:Fmt@result}", "Iteration:I")},
        collect={"out": {"ref": "StringTransform:Twice@result"}})
    events, _ = await run(source, "a,b")
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["[a][a]", "[b][b]"]


# --- nesting and branching ----------------------------------------------------------------------

def loop_around_iteration(passes: int) -> dict:
    """Loop:L runs `passes` times; each pass runs Iteration:I over sys.query's items, which is the
    last body node of the Loop (no downstream)."""
    return {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:Split"]),
        "StringTransform:Split": split(downstream="Loop:L"),
        "Loop:L": cpn("Loop", {"loop_variables": [], "loop_termination_condition": [], "logical_operator": "or",
                               "maximum_loop_count": passes}, ["Message:Out"]),
        "LoopItem:LS": cpn("LoopItem", {}, ["Iteration:I"], parent_id="Loop:L"),
        "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result",
                                         "outputs": {"out": {"ref": "StringTransform:Fmt@result"}}}, parent_id="Loop:L"),
        "IterationItem:S": cpn("IterationItem", {}, ["StringTransform:Fmt"], parent_id="Iteration:I"),
        "StringTransform:Fmt": merge("<{IterationItem:S@item}>", "Iteration:I"),
        "Message:Out": cpn("Message", {"content": ["{Iteration:I@out}"]}),
    }}


async def test_an_iteration_inside_a_loop_runs_fully_on_every_loop_pass():
    events, outcome = await run(loop_around_iteration(2), "a,b,c")
    assert outcome.status == "finished"
    assert len(finished(events, "LoopItem:LS")) == 3                  # 2 passes + the closing check
    assert len(finished(events, "StringTransform:Fmt")) == 6          # 3 items on each of the 2 passes
    assert len(finished(events, "Iteration:I")) == 2
    assert len(finished(events, "Loop:L")) == 1


async def test_reentering_an_iteration_resets_its_collected_outputs_unlike_ragflow():
    # RAGFlow starts the re-entered Iteration at arr[-1] and accumulates across passes (SPEC 5.4);
    # here every entry starts afresh, so the outputs hold exactly one pass's items
    events, _ = await run(loop_around_iteration(2), "a,b,c")
    collected = [f["outputs"]["out"] for f in finished(events, "Iteration:I")]
    assert collected == [["<a>", "<b>", "<c>"], ["<a>", "<b>", "<c>"]]
    items = [f["outputs"]["item"] for f in finished(events, "IterationItem:S")]
    assert items == ["a", "b", "c", "c", "a", "b", "c", "c"]
    assert final_content(events) == '["<a>", "<b>", "<c>"]'


async def test_a_loop_inside_an_iteration_restarts_its_variables_for_every_item():
    source = {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:Split"]),
        "StringTransform:Split": split(),
        "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result",
                                         "outputs": {"counts": {"ref": "Loop:L@n"}, "texts": {"ref": "Loop:L@text"}}},
                           ["Message:Out"]),
        "IterationItem:S": cpn("IterationItem", {}, ["Loop:L"], parent_id="Iteration:I"),
        "Loop:L": cpn("Loop", {"loop_variables": [
            {"variable": "n", "input_mode": "constant", "type": "number", "value": 0},
            {"variable": "text", "input_mode": "variable", "type": "string", "value": "IterationItem:S@item"}],
            "loop_termination_condition": [{"variable": "Loop:L@n", "operator": "≥", "value": 2, "input_mode": "constant"}],
            "maximum_loop_count": 10}, parent_id="Iteration:I"),
        "LoopItem:LS": cpn("LoopItem", {}, ["VariableAssigner:Inc"], parent_id="Loop:L"),
        "VariableAssigner:Inc": cpn("VariableAssigner", {"variables": [
            {"variable": "Loop:L@n", "operator": "+=", "parameter": 1},
            {"variable": "Loop:L@text", "operator": "set", "parameter": "{Loop:L@text}!"}]}, parent_id="Loop:L"),
        "Message:Out": cpn("Message", {"content": ["{Iteration:I@texts}"]}),
    }}
    events, outcome = await run(source, "a,b")
    assert outcome.status == "finished"
    outputs = finished(events, "Iteration:I")[0]["outputs"]
    assert outputs["counts"] == [2, 2]
    assert outputs["texts"] == ["a!!", "b!!"]
    assert len(finished(events, "Loop:L")) == 2
    assert final_content(events) == '["a!!", "b!!"]'


async def test_a_switch_in_the_body_picks_a_branch_per_item():
    source = {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:Split"]),
        "StringTransform:Split": split(),
        "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result",
                                         "outputs": {"routes": {"ref": "Switch:S@_next"}}}, ["Message:Out"]),
        "IterationItem:S": cpn("IterationItem", {}, ["Switch:S"], parent_id="Iteration:I"),
        "Switch:S": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": ["StringTransform:A"], "items": [
            {"cpn_id": "IterationItem:S@item", "operator": "start with", "value": "a"}]}],
            "end_cpn_ids": ["StringTransform:B"]}, ["StringTransform:A", "StringTransform:B"], parent_id="Iteration:I"),
        "StringTransform:A": merge("A:{IterationItem:S@item}", "Iteration:I"),
        "StringTransform:B": merge("B:{IterationItem:S@item}", "Iteration:I"),
        "Message:Out": cpn("Message", {"content": ["{Iteration:I@routes}"]}),
    }}
    events, outcome = await run(source, "apple,kiwi,avocado")
    assert outcome.status == "finished"
    assert [f["outputs"]["result"] for f in finished(events, "StringTransform:A")] == ["A:apple", "A:avocado"]
    assert [f["outputs"]["result"] for f in finished(events, "StringTransform:B")] == ["B:kiwi"]
    assert finished(events, "Iteration:I")[0]["outputs"]["routes"] == [
        ["StringTransform:A"], ["StringTransform:B"], ["StringTransform:A"]]
    assert len(finished(events, "IterationItem:S")) == 4


async def test_an_llm_streaming_to_nothing_in_the_body_is_collected_as_its_text():
    """Its downstream Message does not show it, so its content is a pending generation when the pass ends:
    the Iteration runs it unseen and collects the text (RAGFlow collects the unrun generator's repr)."""
    body = {"LLM:D": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "Describe {IterationItem:S@item}"}]},
                         ["Message:Each"], parent_id="Iteration:I"),
            "Message:Each": cpn("Message", {"content": ["one more"]}, parent_id="Iteration:I")}
    dsl = iteration_dsl(body, first="LLM:D", collect={"out": {"ref": "LLM:D@content", "type": "Array<string>"}})
    events, outcome = await run(dsl, "apple,pear", replies=["Red.", "Green."])
    assert outcome.status == "finished"
    assert final_content(events) == 'Collected:["Red.", "Green."]'
    assert [o["outputs"]["content"] for o in finished(events, "LLM:D")] == ["Red.", "Green."]
