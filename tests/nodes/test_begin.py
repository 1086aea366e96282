"""Begin: the request's inputs become its outputs (SPEC 3.1); file fields and sys.files hand on the files read."""
from __future__ import annotations

import json

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.file_text import HEADER
from canvas2graph.runtime.services.files import LocalFileStore
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn, dsl
from tests.events import final_content
from tests.nodes.helpers import state

FORM = {"name": {"type": "line", "name": "Name", "optional": False},
        "data": {"type": "object", "name": "Data", "optional": True}}


def begin(**params):
    compiled, diags = diagnose({"components": {"begin": {"obj": {"component_name": "Begin", "params": params}, "downstream": []}}})
    assert compiled is not None, diags
    return compiled.plan.nodes["begin"]


def with_request(st, inputs):
    st["request"] = {"inputs": inputs}
    return st


async def test_request_inputs_are_unwrapped_and_become_outputs():
    result = await begin(inputs=FORM).run(with_request(state(), {"name": {"type": "line", "value": "Ann"}, "data": '{"a": 1}'}), None)
    assert result.outputs == {"name": "Ann", "data": {"a": 1}}
    assert result.inputs == result.outputs


async def test_undeclared_request_inputs_are_kept():
    result = await begin().run(with_request(state(), {"extra": 5}), None)
    assert result.outputs == {"extra": 5}


async def test_a_single_field_form_takes_the_query():
    result = await begin(inputs={"topic": {"type": "line"}}).run(with_request(state("rivers"), {}), None)
    assert result.outputs == {"topic": "rivers"}


async def test_no_inputs_and_no_form_give_no_outputs():
    assert (await begin().run(with_request(state("hi"), {}), None)).outputs == {}


def test_mode_must_be_known():
    _, diags = diagnose({"components": {"begin": {"obj": {"component_name": "Begin", "params": {"mode": "chat"}}, "downstream": []}}})
    assert [(d.component_id, d.field) for d in diags if d.severity == "error"] == [("begin", "params.mode")]


# --- file fields ---------------------------------------------------------------------------------------
FILE_FORM = {"doc": {"type": "file", "name": "Document", "optional": False},
             "extra": {"type": "file", "name": "More", "optional": True}}


async def run_files(store, *, inputs=None, files=None, content="{begin@doc}", tenant=None, form=FILE_FORM):
    source = dsl(begin=cpn("Begin", {"mode": "task", "inputs": form}, ["Message:M"]),
                 **{"Message:M": cpn("Message", {"content": [content]})})
    services = {"files": store, **({"tenant": tenant} if tenant else {})}
    script = Script.load({"replies": []})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script, services=services)
        return [e async for e in runner.run_turn("s", TurnRequest(inputs=inputs, files=files))]


def begin_outputs(events):
    [data] = [e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == "begin"]
    return data


async def test_a_file_field_hands_on_its_files_with_their_content_and_prints_as_ragflow_does(tmp_path):
    store = LocalFileStore(tmp_path)
    entry = store.put("notes.txt", b"call Ann", created_by="acme")
    events = await run_files(store, inputs={"doc": {"type": "file", "value": entry},
                                            "extra": {"type": "file", "value": None}}, tenant="acme")
    outputs = begin_outputs(events)["outputs"]
    # always a list (RAGFlow wraps one file in a list), each entry with its parsed content
    assert outputs["doc"] == [{**entry, "content": HEADER.format(name="notes.txt") + "call Ann"}]
    assert outputs["extra"] is None                  # an empty optional field stays empty
    assert json.loads(final_content(events)) == [HEADER.format(name="notes.txt") + "call Ann"]


async def test_sys_files_are_read_at_the_start_of_the_turn(tmp_path):
    store = LocalFileStore(tmp_path)
    entry = store.put("a.csv", b"x\n1\n")
    events = await run_files(store, files=[entry], content="{sys.files}", form={})
    assert json.loads(final_content(events)) == [HEADER.format(name="a.csv") + "| x |\n|---|\n| 1 |"]


async def test_another_tenants_file_fails_the_run_naming_the_field(tmp_path):
    store = LocalFileStore(tmp_path)
    theirs = store.put("secret.txt", b"S", created_by="other")
    events = await run_files(store, inputs={"doc": {"type": "file", "value": [theirs]}}, tenant="acme")
    assert begin_outputs(events)["error"] == f"begin@doc: file {theirs['id']} does not belong to this tenant"


async def test_a_follow_up_turn_without_the_form_runs_with_its_fields_none_as_ragflow_does():
    """Issue 22, family 4: only a session's first turn asks for a form left unfilled; a later turn that does
    not send it again runs with the form's outputs reset to None (parity case begin_form_on_a_follow_up)."""
    form = {"topic": {"type": "line", "name": "Topic", "optional": False},
            "level": {"type": "line", "name": "Level", "optional": False}}
    source = dsl(begin=cpn("Begin", {"inputs": form}, ["Message:M"]),
                 **{"Message:M": cpn("Message", {"content": ["topic={begin@topic} level={begin@level}"], "stream": False})})
    script = Script.load({"replies": []})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script)
        first = [e async for e in runner.run_turn("s", TurnRequest(query="one", inputs={"topic": "cats", "level": "easy"}))]
        assert final_content(first) == "topic=cats level=easy"
        second = [e async for e in runner.run_turn("s", TurnRequest(query="two"))]
        assert runner.outcome.status == "finished"
        begin_done = next(e for e in second if e["event"] == "node_finished" and e["data"]["component_id"] == "begin")
        assert {k: v for k, v in begin_done["data"]["outputs"].items() if not k.startswith("_")} == {"topic": None, "level": None}


async def test_a_first_turn_without_the_form_still_asks_for_it():
    form = {"topic": {"type": "line", "name": "Topic", "optional": False},
            "level": {"type": "line", "name": "Level", "optional": False}}
    source = dsl(begin=cpn("Begin", {"inputs": form}, ["Message:M"]),
                 **{"Message:M": cpn("Message", {"content": ["topic={begin@topic}"]})})
    script = Script.load({"replies": []})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script)
        events = [e async for e in runner.run_turn("s", TurnRequest(query="one"))]
        assert runner.outcome.status == "paused"
        assert sorted(events[-1]["data"]["inputs"]) == ["level", "topic"]


async def test_a_turn_after_a_failed_first_turn_does_not_ask_for_the_form_again():
    form = {"topic": {"type": "line", "name": "Topic", "optional": False},
            "level": {"type": "line", "name": "Level", "optional": True}}
    source = dsl(begin=cpn("Begin", {"inputs": form}, ["LLM:A"]),
                 **{"LLM:A": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "about {begin@topic}"}]},
                                 ["Message:M"]),
                    "Message:M": cpn("Message", {"content": ["topic={begin@topic} {LLM:A@content}"], "stream": False})})
    script = Script.load({"replies": [{"error": "provider down"}, "fine"]})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script)
        first = [e async for e in runner.run_turn("s", TurnRequest(query="one", inputs={"topic": "cats"}))]
        assert runner.outcome.status == "stopped"
        begin_done = next(e for e in first if e["event"] == "node_finished" and e["data"]["component_id"] == "begin")
        assert {k: v for k, v in begin_done["data"]["outputs"].items() if not k.startswith("_")} == {"topic": "cats"}
        second = [e async for e in runner.run_turn("s", TurnRequest(query="two"))]
        assert runner.outcome.status == "finished", [e["data"].get("error") for e in second if e["event"] == "node_finished"]
        assert final_content(second) == "topic= fine"
