"""UserFillUp ("Await response") and Begin forms: pause the turn for a form, resume with its inputs (SPEC 3.1, 3.2, 5.5)."""
from __future__ import annotations

import json

import pytest

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.file_text import HEADER
from canvas2graph.runtime.services.files import LocalFileStore
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRejected, TurnRequest
from tests.events import final_content, finished, trace, user_inputs
from tests.conftest import cpn


# --- helpers ------------------------------------------------------------------------------------

class Session:
    """Turns on one session of one canvas, sharing the scripted model's replies."""

    def __init__(self, runner: Runner):
        self.runner = runner

    async def turn(self, query: str = "", inputs=None) -> list[dict]:
        return [e async for e in self.runner.run_turn("s", TurnRequest(query=query, inputs=inputs))]

    @property
    def outcome(self):
        return self.runner.outcome


async def session(source: dict, replies=()):
    script = Script.load({"replies": list(replies)})
    saver_cm = open_checkpointer(None)
    saver = await saver_cm.__aenter__()
    return Session(Runner(compile_dsl(source), saver, ModelFactory(script=script), script)), saver_cm


@pytest.fixture
async def open_session():
    """`await open_session(dsl, replies)` -> a Session; the checkpointer closes after the test."""
    opened = []

    async def make(source: dict, replies=()):
        s, cm = await session(source, replies)
        opened.append(cm)
        return s
    yield make
    for cm in opened:
        await cm.__aexit__(None, None, None)


FEEDBACK = {"feedback": {"type": "line", "name": "Feedback", "optional": False}}


def ask_dsl(tips: str = "Please answer", form: dict | None = None, *, before: dict | None = None,
            after: str = "Got {UserFillUp:Ask@feedback}", enable_tips: bool = True) -> dict:
    """begin -> [before...] -> UserFillUp:Ask -> Message:Out."""
    before = before or {}
    comps = {"begin": cpn("Begin", downstream=[next(iter(before), "UserFillUp:Ask")]), **before,
             "UserFillUp:Ask": cpn("UserFillUp", {"enable_tips": enable_tips, "tips": tips,
                                                  "inputs": FEEDBACK if form is None else form}, ["Message:Out"]),
             "Message:Out": cpn("Message", {"content": [after]})}
    return {"components": comps}


# --- pausing --------------------------------------------------------------------------------------

async def test_a_form_pauses_the_turn_with_user_inputs_listing_its_fields_without_values(open_session):
    s = await open_session(ask_dsl())
    events = await s.turn("hi")
    assert s.outcome.status == "paused"
    assert trace(events) == ["workflow_started", "node_started:begin", "node_finished:begin", "user_inputs"]
    assert user_inputs(events) == {"inputs": {"feedback": {"type": "line", "name": "Feedback", "optional": False, "value": None}},
                                   "tips": "Please answer"}


async def test_a_field_value_saved_in_the_dsl_is_cleared_in_the_pause(open_session):
    form = {"feedback": {**FEEDBACK["feedback"], "value": "stale"}}
    s = await open_session(ask_dsl(form=form))
    assert user_inputs(await s.turn("hi"))["inputs"]["feedback"]["value"] is None


async def test_tips_substitute_references(open_session):
    before = {"LLM:Draft": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "Draft {sys.query}"}]},
                               ["UserFillUp:Ask"])}
    s = await open_session(ask_dsl("Draft: {LLM:Draft@content}\nFor {sys.query}?", before=before), replies=["Wake up."])
    events = await s.turn("coffee")
    assert user_inputs(events)["tips"] == "Draft: Wake up.\nFor coffee?"
    assert "node_started:UserFillUp:Ask" not in trace(events)


async def test_tips_join_lists_with_commas_and_print_objects_as_json(open_session):
    before = {"StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [";"]},
                                           ["UserFillUp:Ask"])}
    s = await open_session(ask_dsl("Pick one of {StringTransform:Split@result}", before=before))
    assert user_inputs(await s.turn("a;b;c"))["tips"] == "Pick one of a,b,c"


async def test_disabled_tips_are_empty(open_session):
    s = await open_session(ask_dsl("not shown", enable_tips=False))
    assert user_inputs(await s.turn("hi"))["tips"] == ""


async def test_a_paused_session_reports_the_form_it_waits_for(open_session):
    s = await open_session(ask_dsl())
    await s.turn("hi")
    waiting = await s.runner.waiting_for("s")
    assert waiting["component_id"] == "UserFillUp:Ask" and list(waiting["inputs"]) == ["feedback"]


# --- resuming -------------------------------------------------------------------------------------

async def test_the_next_turn_resumes_at_the_form_with_the_inputs(open_session):
    s = await open_session(ask_dsl())
    await s.turn("hi")
    events = await s.turn(inputs={"feedback": {"type": "line", "value": "bolder"}})
    assert s.outcome.status == "finished" and s.outcome.resumed == "pause"
    assert trace(events)[:2] == ["node_started:UserFillUp:Ask", "node_finished:UserFillUp:Ask"]
    assert "workflow_started" not in trace(events) and "node_started:begin" not in trace(events)
    outputs = finished(events, "UserFillUp:Ask")[0]["outputs"]
    assert (outputs["feedback"], outputs["tips"]) == ("bolder", "Please answer")
    assert final_content(events) == "Gotbolder"


async def test_plain_input_values_are_accepted_too(open_session):
    s = await open_session(ask_dsl())
    await s.turn("hi")
    events = await s.turn(inputs={"feedback": "plain"})
    assert finished(events, "UserFillUp:Ask")[0]["outputs"]["feedback"] == "plain"


async def test_components_before_the_pause_do_not_run_again_on_resume(open_session):
    before = {"LLM:Draft": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "Draft {sys.query}"}]},
                               ["UserFillUp:Ask"])}
    s = await open_session(ask_dsl("Draft: {LLM:Draft@content}", before=before,
                                   after="{LLM:Draft@content} + {UserFillUp:Ask@feedback}"), replies=["Wake up."])
    await s.turn("coffee")
    events = await s.turn(inputs={"feedback": "bolder"})
    assert finished(events, "LLM:Draft") == []
    assert s.runner.script.calls == 1
    assert final_content(events) == "Wake up.+bolder"


async def test_a_component_that_ran_beside_the_paused_form_is_not_started_again_on_resume(open_session):
    dsl = ask_dsl("Topic: {sys.query}")
    dsl["components"]["begin"]["downstream"] = ["Message:Sink", "UserFillUp:Ask"]
    dsl["components"]["Message:Sink"] = cpn("Message", {"content": ["Working on {sys.query}"]})
    s = await open_session(dsl)
    paused = await s.turn("coffee")
    assert [e["data"]["component_id"] for e in paused if e["event"] == "node_started"] == ["begin", "Message:Sink"]
    assert paused[-1]["event"] == "user_inputs"
    resumed = await s.turn(inputs={"feedback": "bolder"})
    assert [e["data"]["component_id"] for e in resumed if e["event"] == "node_started"] == ["UserFillUp:Ask", "Message:Out"]
    assert final_content(resumed) == "Gotbolder"       # streamed: the space next to the reference goes, as in RAGFlow


async def test_resuming_without_the_required_inputs_is_rejected_and_the_pause_kept(open_session):
    s = await open_session(ask_dsl())
    await s.turn("hi")
    with pytest.raises(TurnRejected, match="feedback"):
        await s.turn("no inputs")
    events = await s.turn(inputs={"feedback": "now"})
    assert final_content(events) == "Gotnow"


async def test_after_a_resumed_turn_finishes_the_next_turn_starts_at_begin_again(open_session):
    # RAGFlow keeps resuming at the UserFillUp on every later turn (SPEC 5.5, 10.3); we start afresh
    s = await open_session(ask_dsl())
    await s.turn("first")
    await s.turn(inputs={"feedback": "x"})
    events = await s.turn("second")
    assert trace(events)[:2] == ["workflow_started", "node_started:begin"]
    assert s.outcome.status == "paused"


async def test_a_form_with_no_fields_does_not_pause(open_session):
    s = await open_session(ask_dsl("Just so you know", form={}, after="tips were {UserFillUp:Ask@tips}"))
    events = await s.turn("hi")
    assert s.outcome.status == "finished"
    assert "user_inputs" not in trace(events)
    assert trace(events)[3:5] == ["node_started:UserFillUp:Ask", "node_finished:UserFillUp:Ask"]
    assert final_content(events) == "tips wereJust so you know"


async def test_an_optional_field_still_pauses(open_session):
    # RAGFlow's _is_input_field_satisfied ignores `optional` for non-file fields (SPEC 5.5)
    form = {"note": {"type": "line", "name": "Note", "optional": True}}
    s = await open_session(ask_dsl(form=form, after="note={UserFillUp:Ask@note}"))
    events = await s.turn("hi")
    assert s.outcome.status == "paused"
    assert user_inputs(events)["inputs"]["note"]["value"] is None
    events = await s.turn(inputs={"note": "n"})
    assert final_content(events) == "note=n"


async def test_a_form_whose_fields_are_all_optional_resumes_with_no_inputs(open_session):
    form = {"note": {"type": "line", "name": "Note", "optional": True}}
    s = await open_session(ask_dsl(form=form, after="note={UserFillUp:Ask@note}"))
    await s.turn("hi")
    events = await s.turn(inputs={})
    assert s.outcome.status == "finished"
    assert "user_inputs" not in trace(events)
    assert final_content(events) == "note="


async def test_a_form_field_named_inputs_is_an_ordinary_field(open_session):
    # the resume value wraps the request's inputs under "inputs"; a field of that name must not be unwrapped
    form = {"inputs": {"type": "line", "name": "Inputs", "optional": False}}
    s = await open_session(ask_dsl(form=form, after="got={UserFillUp:Ask@inputs}"))
    await s.turn("hi")
    events = await s.turn(inputs={"inputs": "x"})
    assert final_content(events) == "got=x"


# --- Begin forms -----------------------------------------------------------------------------------

def begin_form_dsl(form: dict) -> dict:
    return {"components": {
        "begin": cpn("Begin", {"inputs": form, "tips": "Tell me"}, ["Message:Out"]),
        "Message:Out": cpn("Message", {"content": ["name={begin@name} age={begin@age}"]}),
    }}


NAME_AGE = {"name": {"type": "line", "name": "Name", "optional": False},
            "age": {"type": "integer", "name": "Age", "optional": False}}


async def test_begin_with_a_required_field_and_no_inputs_pauses(open_session):
    s = await open_session(begin_form_dsl(NAME_AGE))
    events = await s.turn("")
    assert s.outcome.status == "paused"
    assert trace(events) == ["workflow_started", "user_inputs"]
    form = user_inputs(events)
    assert set(form["inputs"]) == {"name", "age"} and all(f["value"] is None for f in form["inputs"].values())
    assert form["tips"] == "Tell me"


async def test_a_paused_begin_resumes_with_the_inputs(open_session):
    s = await open_session(begin_form_dsl(NAME_AGE))
    await s.turn("")
    events = await s.turn(inputs={"name": "Ada", "age": {"type": "integer", "value": 36}})
    assert trace(events)[:2] == ["node_started:begin", "node_finished:begin"]
    assert finished(events, "begin")[0]["outputs"]["age"] == 36
    assert final_content(events) == "name=Adaage=36"


async def test_begin_inputs_given_with_the_first_request_do_not_pause(open_session):
    s = await open_session(begin_form_dsl(NAME_AGE))
    events = await s.turn("", inputs={"name": "Ada", "age": 36})
    assert final_content(events) == "name=Adaage=36"


async def test_a_single_field_begin_form_takes_the_query_instead_of_pausing(open_session):
    s = await open_session(begin_form_dsl({"name": NAME_AGE["name"]}))
    events = await s.turn("Grace")
    assert s.outcome.status == "finished"
    assert finished(events, "begin")[0]["outputs"]["name"] == "Grace"


async def test_a_two_field_begin_form_does_not_take_the_query(open_session):
    s = await open_session(begin_form_dsl(NAME_AGE))
    events = await s.turn("Grace")
    assert s.outcome.status == "paused"
    form = user_inputs(events)["inputs"]
    assert set(form) == {"name", "age"} and "Grace" not in str(form)


async def test_optional_begin_fields_never_pause(open_session):
    s = await open_session(begin_form_dsl({"name": {**NAME_AGE["name"], "optional": True}}))
    events = await s.turn("")
    assert s.outcome.status == "finished"
    assert final_content(events) == "name=age="


# --- inside a Loop -----------------------------------------------------------------------------------

def ask_until_stop() -> dict:
    """A Loop whose body asks for a word each pass; typing 'stop' ends it (at most 5 passes)."""
    return {"components": {
        "begin": cpn("Begin", downstream=["Loop:L"]),
        "Loop:L": cpn("Loop", {"loop_variables": [{"variable": "words", "input_mode": "constant", "type": "string", "value": ""}],
                               "loop_termination_condition": [{"variable": "Loop:L@words", "operator": "end with",
                                                               "value": "stop", "input_mode": "constant"}],
                               "maximum_loop_count": 5}, ["Message:Out"]),
        "LoopItem:S": cpn("LoopItem", {}, ["UserFillUp:Word"], parent_id="Loop:L"),
        "UserFillUp:Word": cpn("UserFillUp", {"tips": "So far: {Loop:L@words}", "inputs": {"word": {"type": "line", "name": "W"}}},
                               ["VariableAssigner:Add"], parent_id="Loop:L"),
        "VariableAssigner:Add": cpn("VariableAssigner", {"variables": [
            {"variable": "Loop:L@words", "operator": "set", "parameter": "{Loop:L@words}{UserFillUp:Word@word}"}]},
            parent_id="Loop:L"),
        "Message:Out": cpn("Message", {"content": ["words: {Loop:L@words}"]}),
    }}


async def test_a_form_in_a_loop_pauses_on_every_pass_and_the_loop_state_survives_the_pauses(open_session):
    s = await open_session(ask_until_stop())
    assert user_inputs(await s.turn("go"))["tips"] == "So far: "
    assert user_inputs(await s.turn(inputs={"word": "a"}))["tips"] == "So far: a"
    assert user_inputs(await s.turn(inputs={"word": "b"}))["tips"] == "So far: ab"
    events = await s.turn(inputs={"word": "stop"})
    assert s.outcome.status == "finished"
    assert len(finished(events, "VariableAssigner:Add")) == 1
    assert final_content(events) == "words:abstop"


async def test_the_loop_pass_counter_survives_pauses_unlike_ragflow(open_session):
    # RAGFlow keeps _idx in memory, so every resume restarts maximum_loop_count (SPEC 5.4); the
    # counter is checkpointed here, so a Loop capped at 2 passes asks twice in all
    source = ask_until_stop()
    source["components"]["Loop:L"]["obj"]["params"]["maximum_loop_count"] = 2
    s = await open_session(source)
    await s.turn("go")
    await s.turn(inputs={"word": "a"})
    events = await s.turn(inputs={"word": "b"})
    assert s.outcome.status == "finished"
    assert final_content(events) == "words:ab"


async def test_a_loop_that_ends_in_a_resumed_turn_reports_node_finished_in_that_turn(open_session):
    s = await open_session(ask_until_stop())
    first = await s.turn("go")
    assert finished(first, "Loop:L") == []           # still running when the turn paused
    events = await s.turn(inputs={"word": "stop"})
    loop = finished(events, "Loop:L")
    assert len(loop) == 1
    assert loop[0]["outputs"]["words"] == "stop" and loop[0]["error"] is None
    # the container finishes after its last body component and before what follows it
    order = trace(events)
    assert order.index("node_finished:VariableAssigner:Add") < order.index("node_finished:Loop:L") \
        < order.index("node_finished:Message:Out")


# --- inside an Iteration ---------------------------------------------------------------------------

async def test_a_form_in_an_iteration_asks_once_per_item_with_the_item_in_its_tips(open_session):
    source = {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:Split"]),
        "StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [","]},
                                     ["Iteration:I"]),
        "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result",
                                         "outputs": {"answers": {"ref": "UserFillUp:Rate@score"}}}, ["Message:Out"]),
        "IterationItem:S": cpn("IterationItem", {}, ["UserFillUp:Rate"], parent_id="Iteration:I"),
        "UserFillUp:Rate": cpn("UserFillUp", {"tips": "Rate {item} (#{index})", "inputs": {"score": {"type": "line", "name": "S"}}},
                               parent_id="Iteration:I"),
        "Message:Out": cpn("Message", {"content": ["{Iteration:I@answers}"]}),
    }}
    s = await open_session(source)
    assert user_inputs(await s.turn("tea,cake"))["tips"] == "Rate tea (#0)"
    events = await s.turn(inputs={"score": "5"})
    assert user_inputs(events)["tips"] == "Rate cake (#1)"
    assert finished(events, "Iteration:I") == []
    events = await s.turn(inputs={"score": "3"})
    assert s.outcome.status == "finished"
    assert [f["outputs"]["answers"] for f in finished(events, "Iteration:I")] == [["5", "3"]]
    assert final_content(events) == '["5", "3"]'


async def test_a_file_field_of_the_form_hands_on_the_uploaded_files_content(tmp_path):
    store = LocalFileStore(tmp_path)
    entry = store.put("brief.md", b"# Be bold")
    source = ask_dsl(form={"brief": {"type": "file", "name": "Brief", "optional": False}},
                     after="Read {UserFillUp:Ask@brief}")
    script = Script.load({"replies": []})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory(script=script), script, services={"files": store})
        [e async for e in runner.run_turn("s", TurnRequest(query="hi"))]
        events = [e async for e in runner.run_turn("s", TurnRequest(inputs={"brief": {"type": "file", "value": [entry]}}))]
    assert finished(events, "UserFillUp:Ask")[0]["outputs"]["brief"] == [
        {**entry, "content": HEADER.format(name="brief.md") + "# Be bold"}]
    assert final_content(events) == "Read" + json.dumps([HEADER.format(name="brief.md") + "# Be bold"])
