"""Parallel Iterations (`max_concurrency` above 1): items run at once through LangGraph's fan-out.

Each test compiles a DSL and runs whole turns through the Runner with the scripted model; models that
take time (`delay_ms`) show what ran at once by the start and finish of each component's step
(`_created_time` and `_elapsed_time` in its node_finished), never by a wall-clock threshold.
"""
from __future__ import annotations

import json

import pytest

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.compiler.export import to_json, to_mermaid
from canvas2graph.compiler.parallel import COLLECT_PREFIX, ITEMS_PREFIX
from tests.conftest import cpn
from tests.events import final_content, finished, trace
from tests.nodes.helpers import one_turn as run


def llm(parent: str = "Iteration:I", downstream: list | None = None, prompt: str = "Item {IterationItem:S@item}") -> dict:
    return cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": prompt}]}, downstream,
               parent_id=parent)


def iteration(body: dict, *, concurrency: int, first: str = "LLM:Each", collect: dict | None = None,
              after: str = "{Iteration:I@out}", **params) -> dict:
    """begin -> Split(sys.query on commas) -> Iteration:I (IterationItem:S -> body) -> Message:Out."""
    return {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:Split"]),
        "StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query",
                                                         "delimiters": [","]}, ["Iteration:I"]),
        "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result", "max_concurrency": concurrency,
                                         "outputs": collect or {"out": {"ref": "LLM:Each@content"}}, **params},
                           ["Message:Out"]),
        "IterationItem:S": cpn("IterationItem", {}, [first], parent_id="Iteration:I"),
        **body,
        "Message:Out": cpn("Message", {"content": [after], "stream": False}),
    }}


def spans(events: list[dict], cid: str) -> list[tuple[float, float]]:
    """(start, end) of each step of `cid`, on the run's own clock."""
    return [(f["created_at"], f["created_at"] + f["elapsed_time"]) for f in finished(events, cid)]


def all_overlap(intervals: list[tuple[float, float]]) -> bool:
    """Every step started before any of them finished: they ran at the same time."""
    return max(s for s, _ in intervals) < min(e for _, e in intervals)


def one_at_a_time(intervals: list[tuple[float, float]]) -> bool:
    ordered = sorted(intervals)
    return all(a_end <= b_start for (_, a_end), (b_start, _) in zip(ordered, ordered[1:]))


SLOW = [{"content": f"answer {i}", "delay_ms": 300} for i in range(4)]


# --- running items at once -------------------------------------------------------------------------
async def test_items_run_at_once_up_to_max_concurrency_and_outputs_keep_the_items_order():
    # replies are handed out in call order; the answers name the item they were asked about
    source = iteration({"LLM:Each": llm()}, concurrency=4)
    events, outcome = await run(source, "a,b,c,d", replies=[{"content": "x", "delay_ms": 300}] * 4)
    assert outcome.status == "finished"
    assert all_overlap(spans(events, "LLM:Each"))
    items = [f["outputs"]["item"] for f in finished(events, "IterationItem:S")]
    assert items == ["a", "b", "c", "d"]                  # started in the items' order
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["x", "x", "x", "x"]


async def test_collected_outputs_follow_the_items_order_whatever_order_they_finish_in():
    # the first item's model is the slowest: it finishes last, its answer still comes first
    body = {"LLM:Each": llm(), "StringTransform:Tag": cpn(
        "StringTransform", {"method": "merge", "script": "{IterationItem:S@item}={LLM:Each@content}", "delimiters": [","]},
        parent_id="Iteration:I")}
    body["LLM:Each"]["downstream"] = ["StringTransform:Tag"]
    source = iteration(body, concurrency=3, collect={"out": {"ref": "StringTransform:Tag@result"}})
    replies = [{"content": "slow", "delay_ms": 400}, {"content": "fast", "delay_ms": 10}, {"content": "mid", "delay_ms": 100}]
    events, _ = await run(source, "a,b,c", replies=replies)
    done = [f["outputs"]["result"] for f in finished(events, "StringTransform:Tag")]
    assert done == ["b=fast", "c=mid", "a=slow"]          # the order they finished in
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["a=slow", "b=fast", "c=mid"]
    assert final_content(events) == '["a=slow", "b=fast", "c=mid"]'


async def test_the_default_runs_one_item_after_another_as_ragflows_python_engine():
    events, _ = await run(iteration({"LLM:Each": llm()}, concurrency=1), "a,b,c,d", replies=SLOW)
    assert one_at_a_time(spans(events, "LLM:Each"))
    assert len(finished(events, "IterationItem:S")) == 5             # n + 1 passes, as RAGFlow's
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["answer 0", "answer 1", "answer 2", "answer 3"]


async def test_items_beyond_max_concurrency_wait_for_the_next_wave():
    events, _ = await run(iteration({"LLM:Each": llm()}, concurrency=2), "a,b,c,d", replies=SLOW)
    first, second = spans(events, "LLM:Each")[:2], spans(events, "LLM:Each")[2:]
    assert all_overlap(first) and all_overlap(second)
    assert max(e for _, e in first) <= min(s for s, _ in second)
    assert len(finished(events, "Iteration:I")[0]["outputs"]["out"]) == 4


async def test_each_items_events_keep_their_order_and_the_iteration_finishes_after_every_item():
    events, _ = await run(iteration({"LLM:Each": llm()}, concurrency=4), "a,b,c,d", replies=SLOW)
    steps = trace(events)
    assert steps.index("node_started:Iteration:I") < steps.index("node_started:IterationItem:S")
    assert steps.index("node_finished:Iteration:I") > max(i for i, s in enumerate(steps) if s == "node_finished:LLM:Each")
    assert steps.index("node_finished:Iteration:I") < steps.index("node_started:Message:Out")
    # per item: its IterationItem, then its model (the k-th item's start precedes the k-th model's start)
    item_starts = [i for i, s in enumerate(steps) if s == "node_started:IterationItem:S"]
    model_starts = [i for i, s in enumerate(steps) if s == "node_started:LLM:Each"]
    assert len(item_starts) == len(model_starts) == 4
    assert all(a < b for a, b in zip(item_starts, model_starts))


async def test_an_empty_list_runs_no_item_and_leaves_collected_outputs_none():
    source = iteration({"LLM:Each": llm()}, concurrency=4, after="Done: {Iteration:I@out}")
    source["components"]["Iteration:I"]["obj"]["params"]["items_ref"] = "begin@list"
    source["components"]["begin"] = cpn("Begin", {"inputs": {"list": {"name": "l", "type": "object", "optional": True}}},
                                        ["StringTransform:Split"])
    events, outcome = await run(source, inputs={"list": []})
    assert outcome.status == "finished"
    assert finished(events, "LLM:Each") == []
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] is None


# --- a stream nothing in the item shows (issue 22, defect family 10) ------------------------------------
def unshown_stream(**llm_params) -> dict:
    """Each item: an LLM whose downstream Message names the item, not the LLM: its stream is never shown."""
    body = {"LLM:Each": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "{IterationItem:S@item}"}],
                                    **llm_params}, ["Message:Inner"], parent_id="Iteration:I"),
            "Message:Inner": cpn("Message", {"content": ["item {IterationItem:S@item}"]}, parent_id="Iteration:I")}
    return iteration(body, concurrency=3)


async def test_a_generation_no_message_in_the_item_shows_is_run_at_the_items_end_and_collected_as_text():
    events, outcome = await run(unshown_stream(), "a,b,c", replies=["one", "two", "three"])
    assert outcome.status == "finished"
    collected = finished(events, "Iteration:I")[0]["outputs"]["out"]
    assert sorted(collected) == ["one", "three", "two"]          # text, never a pending-generation record
    assert sorted(f["outputs"]["content"] for f in finished(events, "LLM:Each")) == ["one", "three", "two"]
    assert json.loads(final_content(events)) == collected          # what the Message after it shows
    # each LLM finishes after its item's Message, before the Iteration (the sequential order, per item)
    order = [(e["event"], e["data"].get("component_id")) for e in events if e["event"] == "node_finished"]
    assert order.index(("node_finished", "Iteration:I")) > max(i for i, x in enumerate(order) if x[1] == "LLM:Each")


async def test_an_unshown_generation_that_fails_in_an_item_is_the_llms_failure():
    events, outcome = await run(unshown_stream(), "a,b,c", replies=["one", {"error": "provider down"}, "three"])
    assert outcome.status == "stopped"
    failed = [f for f in finished(events, "LLM:Each") if f["error"]]
    assert len(failed) == 1 and "provider down" in failed[0]["error"]
    assert "workflow_finished" not in trace(events)


async def test_an_unshown_generation_that_fails_with_a_comment_default_collects_the_default():
    source = unshown_stream(exception_method="comment", exception_default_value="fallback")
    events, outcome = await run(source, "a,b,c", replies=["one", {"error": "provider down"}, "three"])
    assert outcome.status == "finished"
    assert sorted(finished(events, "Iteration:I")[0]["outputs"]["out"]) == ["fallback", "one", "three"]


# --- failures, retries, timeouts, cancellation: per item -------------------------------------------
async def test_a_failing_item_handled_by_its_component_leaves_the_other_items_alone():
    body = {"LLM:Each": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "{IterationItem:S@item}"}],
                                    "exception_method": "comment", "exception_default_value": "fallback"},
                            parent_id="Iteration:I")}
    replies = [{"content": "one", "delay_ms": 50}, {"error": "provider down"}, {"content": "three", "delay_ms": 50}]
    events, outcome = await run(iteration(body, concurrency=3), "a,b,c", replies=replies)
    assert outcome.status == "finished"
    assert sorted(finished(events, "Iteration:I")[0]["outputs"]["out"]) == ["fallback", "one", "three"]


async def test_an_unhandled_failure_in_one_item_stops_the_turn_naming_the_component():
    replies = [{"content": "one", "delay_ms": 50}, {"error": "provider down"}, {"content": "three", "delay_ms": 50}]
    events, outcome = await run(iteration({"LLM:Each": llm()}, concurrency=3), "a,b,c", replies=replies)
    assert outcome.status == "stopped"
    failed = [f for f in finished(events, "LLM:Each") if f["error"]]
    assert len(failed) == 1 and "provider down" in failed[0]["error"]
    assert "workflow_finished" not in trace(events)


async def test_a_component_retries_inside_its_own_item():
    body = {"LLM:Each": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "{IterationItem:S@item}"}],
                                    "max_retries": 2, "delay_after_error": 0}, parent_id="Iteration:I")}
    replies = [{"error": "flaky"}, "ok 1", "ok 2"]
    events, outcome = await run(iteration(body, concurrency=2), "a,b", replies=replies)
    assert outcome.status == "finished"
    assert sorted(finished(events, "Iteration:I")[0]["outputs"]["out"]) == ["ok 1", "ok 2"]


async def test_the_component_timeout_applies_to_each_item(monkeypatch):
    monkeypatch.setenv("COMPONENT_EXEC_TIMEOUT", "0.2")
    replies = [{"content": "quick"}, {"content": "too slow", "delay_ms": 5000}]
    events, outcome = await run(iteration({"LLM:Each": llm()}, concurrency=2), "a,b", replies=replies)
    assert outcome.status == "stopped"
    assert any("timed out after 0.2 s" in (f["error"] or "") for f in finished(events, "LLM:Each"))


# --- nested containers inside items ----------------------------------------------------------------
async def test_a_loop_inside_a_parallel_item_restarts_its_variables_for_every_item():
    body = {
        "Loop:L": cpn("Loop", {"loop_variables": [
            {"variable": "n", "input_mode": "constant", "type": "number", "value": 0},
            {"variable": "text", "input_mode": "variable", "type": "string", "value": "IterationItem:S@item"}],
            "loop_termination_condition": [{"variable": "Loop:L@n", "operator": "≥", "value": 2, "input_mode": "constant"}],
            "maximum_loop_count": 10}, parent_id="Iteration:I"),
        "LoopItem:LS": cpn("LoopItem", {}, ["VariableAssigner:Inc"], parent_id="Loop:L"),
        "VariableAssigner:Inc": cpn("VariableAssigner", {"variables": [
            {"variable": "Loop:L@n", "operator": "+=", "parameter": 1},
            {"variable": "Loop:L@text", "operator": "set", "parameter": "{Loop:L@text}!"}]}, parent_id="Loop:L"),
    }
    source = iteration(body, concurrency=3, first="Loop:L", collect={"out": {"ref": "Loop:L@text"}})
    events, outcome = await run(source, "a,b,c")
    assert outcome.status == "finished"
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["a!!", "b!!", "c!!"]
    assert len(finished(events, "Loop:L")) == 3


async def test_an_item_reads_the_query_other_components_and_the_conversation_it_names():
    """An item's copy of the state keeps what its components read (compiler/parallel.py, `_item_state`)."""
    source = iteration({"LLM:Each": llm(prompt="{sys.query} | {begin@topic} | {StringTransform:Split@result} | "
                                               "{IterationItem:S@item}")}, concurrency=2,
                       after="{Iteration:I@out} {sys.history}")
    source["components"]["begin"]["obj"]["params"]["inputs"] = {"topic": {"type": "line", "name": "Topic"}}
    events, outcome = await run(source, "a,b", replies=["x", "y"], inputs={"topic": "fruit"})
    assert outcome.status == "finished"
    assert [f["inputs"] for f in finished(events, "LLM:Each")] == [
        {"sys.query": "a,b", "begin@topic": "fruit", "StringTransform:Split@result": ["a", "b"],
         "IterationItem:S@item": item} for item in ("a", "b")]
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["x", "y"]


async def test_a_parallel_iteration_inside_a_parallel_item():
    body = {
        "StringTransform:Inner": cpn("StringTransform", {"method": "split", "split_ref": "IterationItem:S@item",
                                                         "delimiters": ["-"]}, ["Iteration:J"], parent_id="Iteration:I"),
        "Iteration:J": cpn("Iteration", {"items_ref": "StringTransform:Inner@result", "max_concurrency": 2,
                                         "outputs": {"parts": {"ref": "StringTransform:Up@result"}}}, parent_id="Iteration:I"),
        "IterationItem:T": cpn("IterationItem", {}, ["StringTransform:Up"], parent_id="Iteration:J"),
        "StringTransform:Up": cpn("StringTransform", {"method": "merge", "script": "<{IterationItem:T@item}>",
                                                      "delimiters": [","]}, parent_id="Iteration:J"),
    }
    source = iteration(body, concurrency=2, first="StringTransform:Inner", collect={"out": {"ref": "Iteration:J@parts"}})
    events, outcome = await run(source, "a-b,c-d-e,f")
    assert outcome.status == "finished"
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == [["<a>", "<b>"], ["<c>", "<d>", "<e>"], ["<f>"]]
    assert len(finished(events, "Iteration:J")) == 3


async def test_a_parallel_iteration_inside_a_loop_runs_on_every_loop_pass():
    source = iteration({"LLM:Each": llm()}, concurrency=2)
    comps = source["components"]
    comps["begin"]["downstream"] = ["Loop:L"]
    comps["Loop:L"] = cpn("Loop", {"loop_variables": [{"variable": "n", "input_mode": "constant", "type": "number", "value": 0}],
                                   "loop_termination_condition": [{"variable": "Loop:L@n", "operator": "≥", "value": 2,
                                                                   "input_mode": "constant"}],
                                   "maximum_loop_count": 5}, ["Message:Out"])
    comps["LoopItem:LS"] = cpn("LoopItem", {}, ["StringTransform:Split"], parent_id="Loop:L")
    comps["StringTransform:Split"]["parent_id"] = "Loop:L"
    comps["Iteration:I"]["parent_id"] = "Loop:L"
    comps["Iteration:I"]["downstream"] = ["VariableAssigner:Inc"]
    comps["VariableAssigner:Inc"] = cpn("VariableAssigner", {"variables": [
        {"variable": "Loop:L@n", "operator": "+=", "parameter": 1}]}, parent_id="Loop:L")
    events, outcome = await run(source, "a,b", replies=["1", "2", "3", "4"])
    assert outcome.status == "finished"
    assert [f["outputs"]["out"] for f in finished(events, "Iteration:I")] == [["1", "2"], ["3", "4"]]


# --- the compiled graph, its exports and its checks ------------------------------------------------
def test_the_graph_has_an_items_node_and_a_collect_node_and_the_body_runs_in_the_item_graph():
    compiled = compile_dsl(iteration({"LLM:Each": llm()}, concurrency=4))
    nodes = set(compiled.builder().nodes)
    assert {f"{ITEMS_PREFIX}Iteration.I", f"{COLLECT_PREFIX}Iteration.I", "Iteration.I"} <= nodes
    assert "LLM.Each" not in nodes and "IterationItem.S" not in nodes
    assert compiled.parallel == {"Iteration:I": 4}
    assert compiled.builder().nodes["Iteration.I"].metadata["max_concurrency"] == 4


def test_max_concurrency_shows_in_mermaid_and_json():
    plan = compile_dsl(iteration({"LLM:Each": llm()}, concurrency=4)).plan
    assert "max_concurrency 4" in to_mermaid(plan)
    node = next(n for n in to_json(plan)["nodes"] if n["id"] == "Iteration:I")
    assert node["max_concurrency"] == 4


@pytest.mark.parametrize("value", [-1, 1001, "many"])
def test_a_bad_max_concurrency_is_a_compile_error_naming_the_field(value):
    _, diags = diagnose(iteration({"LLM:Each": llm()}, concurrency=value))
    errors = [d for d in diags if d.severity == "error"]
    assert errors and errors[0].component_id == "Iteration:I" and "max_concurrency" in str(errors[0])


@pytest.mark.parametrize("value", [0, 1])
def test_zero_and_one_run_items_one_at_a_time(value):
    compiled = compile_dsl(iteration({"LLM:Each": llm()}, concurrency=value))
    assert compiled.parallel == {}
    assert "LLM.Each" in compiled.builder().nodes


def test_max_concurrency_shows_in_the_picture():
    from canvas2graph.compiler.picture import to_dot
    plan = compile_dsl(iteration({"LLM:Each": llm()}, concurrency=4)).plan
    assert "max_concurrency 4" in to_dot(plan)


async def test_an_ejected_parallel_iteration_runs_its_items_at_once(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    from canvas2graph.compiler.python_writer import to_python
    source = iteration({"LLM:Each": llm()}, concurrency=3)
    module = to_python(compile_dsl(source), source="agent.json")
    assert "canvas.parallel_iteration(builder, 'Iteration:I')" in module
    assert "'LLM.Each'" not in module              # the body runs in the item graph, not as a node here
    path = tmp_path / "agent.py"
    path.write_text(module)
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [{"content": f"r{i}", "delay_ms": 200} for i in range(3)]}))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(path), "--query", "a,b,c", "--format", "jsonl", "--llm-script", str(script),
                           "--session", "s", "--db", str(tmp_path / "s.db")],
                          cwd=repo, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert all_overlap(spans(events, "LLM:Each"))
    assert finished(events, "Iteration:I")[0]["outputs"]["out"] == ["r0", "r1", "r2"]


def test_a_form_inside_a_parallel_item_is_a_compile_error_naming_it():
    body = {"UserFillUp:Ask": cpn("UserFillUp", {"inputs": {"x": {"type": "line", "name": "X", "optional": False}}},
                                  ["LLM:Each"], parent_id="Iteration:I"), "LLM:Each": llm()}
    _, diags = diagnose(iteration(body, concurrency=2, first="UserFillUp:Ask"))
    errors = [d for d in diags if d.code == "pause-in-parallel-item"]
    assert [(d.component_id, d.field) for d in errors] == [("UserFillUp:Ask", "parent_id")]
    assert "max_concurrency" in errors[0].message
    _, diags = diagnose(iteration(body, concurrency=1, first="UserFillUp:Ask"))
    assert not [d for d in diags if d.code == "pause-in-parallel-item"]


def test_an_exit_loop_leaving_a_loop_around_a_parallel_iteration_is_a_compile_error():
    source = iteration({"ExitLoop:X": cpn("ExitLoop", {}, parent_id="Iteration:I")}, concurrency=2, first="ExitLoop:X",
                       collect={})
    comps = source["components"]
    comps["begin"]["downstream"] = ["Loop:L"]
    comps["Loop:L"] = cpn("Loop", {"loop_variables": [], "loop_termination_condition": [], "maximum_loop_count": 2},
                          ["Message:Out"])
    comps["LoopItem:LS"] = cpn("LoopItem", {}, ["StringTransform:Split"], parent_id="Loop:L")
    comps["StringTransform:Split"]["parent_id"] = "Loop:L"
    comps["Iteration:I"]["parent_id"] = "Loop:L"
    comps["Iteration:I"]["downstream"] = []
    comps["Message:Out"]["obj"]["params"]["content"] = ["done"]
    _, diags = diagnose(source)
    errors = [d for d in diags if d.code == "exit-from-parallel-item"]
    assert [(d.component_id, d.field, d.severity) for d in errors] == [("ExitLoop:X", "parent_id", "error")]
    assert "Loop:L" in errors[0].message
