"""RAGFlow's `all.json` demo canvas: its defects are diagnosed, and a repaired copy runs.

`all.json` (../shared/ragflow/examples) is a menu: `UserFillUp:Menu` asks for a demo name and
`Switch:Route` sends the run to one demo branch. Two of its defects are real (SPEC 9.1, 10.16):
`Loop:InputUntil1` has an empty loop variable and the fifth case of `Switch:Route` also leads to
`CodeExec:FunnyBroomsShare`, which does not exist. The tests repair a copy and run the Loop demo
(UserFillUp, Switch, ExitLoop, across several paused turns), the Iteration demo (StringTransform split
and merge) and the Code demo (CodeExec reading a UserFillUp value).

The repaired canvas, as far as the tests use it:

    begin -> UserFillUp:Menu (demo) -> Switch:Route
      demo == "loop"      -> Loop:InputUntil1 -> Message:LoopDone
                               LoopItem -> UserFillUp:LoopInput (value) -> Switch:LoopCheck
                                 value == "1" -> ExitLoop:LoopExit
                                 else         -> Message:LoopContinue (loops back)
      demo == "iteration" -> UserFillUp:IterInput (csv) -> StringTransform:SplitCSV
                               -> Iteration:IterateList (IterationItem -> StringTransform:FmtItem)
                               -> Message:IterDone
      no match            -> Message:Help
"""
from __future__ import annotations

import copy
import json

import pytest

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.nodes.registry import lookup
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.events import final_content, finished, trace
from tests.conftest import shared_dir

LOOP_TIPS = "请输入任意内容，输入 `1` 则退出循环："
MENU_TIPS = "请选择要演示的模块："


def all_json() -> dict:
    return json.loads((shared_dir() / "ragflow" / "examples" / "all.json").read_text(encoding="utf-8"))


def repaired(dsl: dict) -> dict:
    """A copy with the two defects fixed and every unsupported component replaced by a Message."""
    dsl = copy.deepcopy(dsl)
    comps = dsl["components"]
    loop = comps["Loop:InputUntil1"]["obj"]["params"]
    loop["loop_variables"] = [v for v in loop["loop_variables"] if v.get("variable")]
    for case in comps["Switch:Route"]["obj"]["params"]["conditions"]:
        case["to"] = [t for t in case["to"] if t in comps]
    _, diags = diagnose(dsl)
    for d in diags:
        if d.code == "unsupported" and d.field == "obj.component_name":
            entry = comps[d.component_id]
            entry["obj"] = {"component_name": "Message",
                            "params": {"content": [f"{entry['obj']['component_name']} is not available here."]}}
    return dsl


@pytest.fixture(scope="module")
def source() -> dict:
    return all_json()


@pytest.fixture(scope="module")
def fixed(source) -> dict:
    return repaired(source)


class Session:
    def __init__(self, runner: Runner):
        self.runner = runner

    async def turn(self, query: str = "", **inputs) -> list[dict]:
        request = TurnRequest(query=query, inputs=inputs or None)
        return [e async for e in self.runner.run_turn("s", request)]

    @property
    def status(self) -> str:
        return self.runner.outcome.status


@pytest.fixture
async def chat(fixed):
    script = Script.load({"replies": []})          # the demos used here call no model
    async with open_checkpointer(None) as saver:
        yield Session(Runner(compile_dsl(fixed), saver, ModelFactory(script=script), script))


def form(events: list[dict]) -> dict:
    found = [e["data"] for e in events if e["event"] == "user_inputs"]
    assert len(found) == 1, trace(events)
    return found[0]


# --- diagnostics ------------------------------------------------------------------------------------

def test_the_empty_loop_variable_is_reported(source):
    compiled, diags = diagnose(source)
    assert compiled is None
    found = [d for d in diags if d.component_id == "Loop:InputUntil1"]
    assert [(d.severity, d.code, d.field) for d in found] == [("error", "invalid-param", "params.loop_variables")]
    assert "not complete" in found[0].message


def test_the_switch_case_leading_to_a_missing_codeexec_is_reported(source):
    _, diags = diagnose(source)
    found = [d for d in diags if d.code == "dangling-route"]
    assert [(d.component_id, d.field) for d in found] == [("Switch:Route", "params.conditions.4.to")]
    assert "CodeExec:FunnyBroomsShare" in found[0].message and "Case 5" in found[0].message


def test_every_other_error_names_a_component_this_version_does_not_run(source):
    _, diags = diagnose(source)
    others = [d for d in diags if d.severity == "error" and d.code not in ("dangling-route", "invalid-param")]
    for d in others:
        assert (d.code, d.field) == ("unsupported", "obj.component_name"), str(d)
        assert lookup(source["components"][d.component_id]["obj"]["component_name"]) is None


def test_the_repaired_copy_compiles_with_warnings_only(fixed):
    compiled, diags = diagnose(fixed)
    assert compiled is not None, [str(d) for d in diags if d.severity == "error"]
    assert {d.severity for d in diags} <= {"warning"}


def test_the_repaired_copy_keeps_every_demo_branch(source, fixed):
    assert set(fixed["components"]) == set(source["components"])
    routes = fixed["components"]["Switch:Route"]["obj"]["params"]["conditions"]
    assert [c["to"] for c in routes][4] == ["DataOperations:UpdateSample"]
    assert fixed["components"]["Loop:InputUntil1"]["obj"]["params"]["loop_variables"] == []


# --- the menu -------------------------------------------------------------------------------------

async def test_the_first_turn_pauses_at_the_menu(chat):
    events = await chat.turn("hi")
    assert chat.status == "paused"
    assert trace(events) == ["workflow_started", "node_started:begin", "node_finished:begin", "user_inputs"]
    menu = form(events)
    assert menu["tips"] == MENU_TIPS
    assert list(menu["inputs"]) == ["demo"]
    assert menu["inputs"]["demo"]["value"] is None            # the value saved in the DSL is cleared
    assert "loop" in menu["inputs"]["demo"]["options"]


async def test_an_unknown_demo_takes_the_else_branch(chat):
    await chat.turn("hi")
    events = await chat.turn(demo="nothing")
    assert finished(events, "Switch:Route")[0]["outputs"]["_next"] == ["Message:Help"]
    assert final_content(events).startswith("未匹配到分支")


# --- the Loop demo: UserFillUp, Switch and ExitLoop across turns ----------------------------------------

async def test_choosing_loop_enters_the_loop_and_pauses_for_a_value(chat):
    await chat.turn("hi")
    events = await chat.turn(demo="loop")
    assert chat.status == "paused"
    assert finished(events, "Switch:Route")[0]["outputs"]["_next"] == ["Loop:InputUntil1"]
    assert trace(events)[-4:] == ["node_started:Loop:InputUntil1", "node_started:LoopItem:InputUntil1Start",
                                  "node_finished:LoopItem:InputUntil1Start", "user_inputs"]
    assert form(events) == {"inputs": {"value": {"name": "值", "optional": False, "options": [], "type": "line", "value": None}},
                            "tips": LOOP_TIPS}


async def test_a_value_other_than_1_continues_the_loop_and_asks_again(chat):
    await chat.turn("hi")
    await chat.turn(demo="loop")
    events = await chat.turn(value="abc")
    assert chat.status == "paused"
    assert finished(events, "Switch:LoopCheck")[0]["outputs"]["_next"] == ["Message:LoopContinue"]
    assert finished(events, "Message:LoopContinue")[0]["outputs"]["content"] == "继续循环中，你输入的是：abc"
    assert [x for x in trace(events) if x.startswith("node_finished")] == [
        "node_finished:UserFillUp:LoopInput", "node_finished:Switch:LoopCheck",
        "node_finished:Message:LoopContinue", "node_finished:LoopItem:InputUntil1Start"]
    assert form(events)["tips"] == LOOP_TIPS


async def test_entering_1_leaves_through_exit_loop_to_the_loop_downstream(chat):
    await chat.turn("hi")
    await chat.turn(demo="loop")
    await chat.turn(value="abc")
    await chat.turn(value="again")
    events = await chat.turn(value="1")
    assert chat.status == "finished"
    assert finished(events, "Switch:LoopCheck")[0]["outputs"]["_next"] == ["ExitLoop:LoopExit"]
    t = trace(events)
    assert t.index("node_finished:ExitLoop:LoopExit") < t.index("node_started:Message:LoopDone")
    assert "node_started:LoopItem:InputUntil1Start" not in t
    assert "node_started:Message:LoopContinue" not in t
    assert final_content(events) == "循环结束。你最后一次输入为：1"


async def test_after_the_loop_demo_the_next_turn_shows_the_menu_again(chat):
    await chat.turn("hi")
    await chat.turn(demo="loop")
    await chat.turn(value="1")
    events = await chat.turn("once more")
    assert trace(events)[:2] == ["workflow_started", "node_started:begin"]
    assert form(events)["tips"] == MENU_TIPS


# --- the Iteration demo: StringTransform split, Iteration, StringTransform merge ------------------------

async def test_the_iteration_demo_formats_every_item_of_the_csv(chat):
    await chat.turn("hi")
    events = await chat.turn(demo="iteration")
    assert form(events)["tips"] == "请输入一个逗号分隔列表，例如: a,b,c"
    events = await chat.turn(csv="x,y,z")
    assert chat.status == "finished"
    assert finished(events, "StringTransform:SplitCSV")[0]["outputs"]["result"] == ["x", "y", "z"]
    assert [f["outputs"]["result"] for f in finished(events, "StringTransform:FmtItem")] == ["0: x", "1: y", "2: z"]
    assert len(finished(events, "IterationItem:IterStart")) == 4
    assert finished(events, "Iteration:IterateList")[0]["outputs"]["lines"] == ["0: x", "1: y", "2: z"]
    t = trace(events)
    assert t.index("node_finished:Iteration:IterateList") < t.index("node_started:Message:IterDone")
    assert final_content(events) == '迭代结束。\n输入数组:["x", "y", "z"]\n格式化输出(lines):["0: x", "1: y", "2: z"]'


async def test_the_code_demo_doubles_the_number_with_codeexec(chat, tmp_path, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_ARTIFACTS_DIR", str(tmp_path))
    await chat.turn("hi")
    events = await chat.turn(demo="code")
    events = await chat.turn(x=21)
    assert chat.status == "finished"
    assert finished(events, "CodeExec:Double")[0]["outputs"]["result"] == 42
    assert final_content(events) == "输入 x=21\nCodeExec.result=42\nERROR="


async def test_one_session_runs_the_loop_demo_then_the_iteration_demo(chat):
    await chat.turn("hi")
    await chat.turn(demo="loop")
    await chat.turn(value="no")
    assert final_content(await chat.turn(value="1")) == "循环结束。你最后一次输入为：1"
    await chat.turn("next")
    await chat.turn(demo="iteration")
    events = await chat.turn(csv="only")
    assert finished(events, "Iteration:IterateList")[0]["outputs"]["lines"] == ["0: only"]
    assert finished(events, "UserFillUp:LoopInput") == []           # the loop branch is not taken again
