"""Canvases from RAGFlow v0.19 and before compile into today's components and run (compiler/dsl/legacy.py).

The data are RAGFlow v0.19.1's own agent templates (tests/fixtures/ragflow_v0_19, with their NOTICE).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import canvas2graph
from canvas2graph import CompileError, RunContext, Script
from canvas2graph.compiler.dsl.legacy import is_legacy, migrate_legacy
from canvas2graph.compiler.dsl.load import load_dsl
from langgraph.checkpoint.memory import InMemorySaver

OLD = Path(__file__).resolve().parents[1] / "fixtures" / "ragflow_v0_19"
TEMPLATES = sorted(OLD.glob("*.json"))
LLM = "gpt-4o@OpenAI"
# Answers for every model call and tool an old template makes, so each runs offline.
TOOLS = {name: [f"{name} result {i}" for i in range(4)]
         for name in ("DuckDuckGo", "Wikipedia", "PubMed", "QWeather", "AkShare", "ExeSQL")}
TOOLS["WenCai"] = [{"outputs": {"report": "wencai report"}, "return": "wencai report"}] * 2
INPUTS = {"title": "Solar power", "language": "English", "keywords": "solar", "lang": "Python",
          "file": "print('hi')"}


def old(name: str) -> dict:
    return json.loads((OLD / name).read_text(encoding="utf-8"))


def configured(doc: dict) -> dict:
    """DB_Assistant's ExeSQL ships without a database, as RAGFlow's editor leaves it for the user."""
    for cpn in doc["dsl"]["components"].values():
        if cpn["obj"]["component_name"] == "ExeSQL":
            cpn["obj"]["params"].update(host="127.0.0.1", database="test", username="root", port=3306)
    return doc


def script(*replies: str, by_component: dict | None = None) -> RunContext:
    return RunContext(script=Script.load({"replies": list(replies), "auto_reply": "Reply {n} from {component}.",
                                          "by_component": by_component or {},
                                          "retrieval": ["Refunds take 30 days."], "tool_results": TOOLS}))


async def turn(graph, thread: str, query: str, context: RunContext, inputs: dict | None = None) -> list[dict]:
    payload = {"query": query, "inputs": inputs or {}}
    config = {"configurable": {"thread_id": thread}}
    return [e async for e in canvas2graph.ragflow_events(graph, payload, config, context=context)]


def answer(events: list[dict]) -> str:
    return "".join(e["data"].get("content") or "" for e in events if e["event"] == "message")


def ran(events: list[dict]) -> list[str]:
    return [e["data"]["component_id"] for e in events if e["event"] == "node_finished"]


def test_every_old_template_is_recognised_and_today_s_are_not():
    assert len(TEMPLATES) == 11
    assert all(is_legacy(old(p.name)["dsl"]) for p in TEMPLATES)
    today = Path(canvas2graph.__file__).parent / "templates" / "ragflow"
    assert not any(is_legacy(json.loads(p.read_text())["dsl"]) for p in today.glob("*.json"))


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.stem)
def test_every_v0_19_template_compiles_with_a_model_chosen(path):
    canvas = canvas2graph.load(configured(old(path.name)), default_llm=LLM)
    names = {node.component_type for node in canvas.plan.nodes.values()}
    assert not names & {"Answer", "Generate", "RewriteQuestion", "KeywordExtract", "Template", "Baidu", "Concentrator"}


def test_a_database_left_unconfigured_is_named_by_component_and_field():
    with pytest.raises(CompileError) as err:
        canvas2graph.load(old("DB_Assistant.json"), default_llm=LLM)
    named = {(d.component_id, d.field) for d in err.value.diagnostics}
    assert ("ExeSQL:QuietRosesRun", "params.host") in named
    assert ("ExeSQL:QuietRosesRun", "params.database") in named


@pytest.mark.parametrize("path", [p for p in TEMPLATES if p.name != "DB_Assistant.json"], ids=lambda p: p.stem)
async def test_every_v0_19_template_answers_a_turn_offline(path):
    graph = canvas2graph.compile(configured(old(path.name)), checkpointer=InMemorySaver(), default_llm=LLM)
    events = await turn(graph, "t", "Tell me about solar power", script(), INPUTS)
    assert events[-1]["event"] == "workflow_finished"
    assert not events[-1]["data"].get("error")
    assert answer(events).strip()


def test_what_each_old_component_becomes():
    dsl, notes = migrate_legacy(old("customer_service.json")["dsl"])
    comps = dsl["components"]
    kind = {cid: c["obj"]["component_name"] for cid, c in comps.items()}
    assert kind["Generate:YoungTrainsSee"] == "LLM" and kind["RewriteQuestion:AllNightsSniff"] == "LLM"
    assert kind["answer:0"] == "Message"
    # Begin leads where the Answer after it led: every turn starts at Begin today
    assert comps["begin"]["downstream"] == ["RewriteQuestion:AllNightsSniff"]
    assert comps["answer:0"]["downstream"] == []
    # the Answer shows whichever Generate ran (the Message shows its own text)
    shown = comps["answer:0"]["obj"]["params"]["content"][0]
    assert "{Generate:YoungTrainsSee@content}" in shown and "Message:" not in shown
    # Retrieval reads the rewritten question it named in its old `query`
    assert comps["Retrieval:WholeStarsDrive"]["obj"]["params"]["query"] == "{RewriteQuestion:AllNightsSniff@content}"
    # the Categorize classifies the rewritten question, its examples one per line
    cat = comps["Categorize:EightyWavesEnd"]["obj"]["params"]
    assert cat["query"] == "RewriteQuestion:AllNightsSniff@content"
    assert cat["category_description"]["1. contact"]["to"] == ["Message:GoodBugsTurn"]
    assert len(cat["category_description"]["1. contact"]["examples"]) == 5
    assert [n.code for n in notes] == ["legacy-migrated"]       # cite, said once, as a warning


def test_an_old_prompt_names_components_and_its_input_as_references():
    dsl, _ = migrate_legacy(old("research_report.json")["dsl"])
    comps = dsl["components"]
    prompt = comps["Generate:RealLoopsVanish"]["obj"]["params"]["sys_prompt"]
    assert "{IterationItem:OliveStatesSmoke@item}" in prompt and "{begin@language}" in prompt
    assert "{Iteration:BlueClothsGrab__text@result}" in prompt
    # a Template is a StringTransform merge of the same text
    merge = comps["Template:LegalDoorsAct"]["obj"]["params"]
    assert merge["method"] == "merge" and merge["script"].startswith("<h1> {begin@title}</h1>")
    # an old Iteration: split its input, walk the pieces, merge what the body's end gave
    assert comps["Generate:RedWormsDouble"]["downstream"] == ["Iteration:ThreeParksChew__split"]
    split = comps["Iteration:ThreeParksChew__split"]["obj"]["params"]
    assert split["split_ref"] == "Generate:RedWormsDouble@content" and split["delimiters"] == ["\n"]
    loop = comps["Iteration:ThreeParksChew"]["obj"]["params"]
    assert loop["outputs"]["content"]["ref"] == "Template:SpottyWaspsLose@result"


async def test_an_old_iteration_runs_once_per_piece_of_its_input():
    graph = canvas2graph.compile(old("research_report.json"), checkpointer=InMemorySaver(), default_llm=LLM)
    replies = {"Generate:EveryCoinsStare": ["solar cells, solar farms"], "Generate:RedWormsDouble": ["Intro\nCost"],
               "Generate:RealLoopsVanish": ["Part on intro", "Part on cost"]}
    events = await turn(graph, "t", "Write it", script(by_component=replies), INPUTS)
    text = answer(events)
    assert "<h1> Solar power</h1>" in text
    assert "<h2> Intro</h2>\n<div> Part on intro</div>" in text and "<h2> Cost</h2>" in text


async def test_concentrators_are_wired_around_and_their_routes_reach_both_branches():
    dsl, notes = migrate_legacy(old("general_chat_bot.json")["dsl"])
    assert not any(c["obj"]["component_name"] == "Concentrator" for c in dsl["components"].values())
    to = dsl["components"]["Categorize:KhakiTimesSmile"]["obj"]["params"]["category_description"]["2. finance"]["to"]
    assert to == ["WenCai:TenParksOpen", "KeywordExtract:FineApesSmash"]
    assert "legacy-migrated" in {n.code for n in notes}


async def test_a_canvas_with_two_answers_resumes_after_the_one_that_spoke_last():
    """HR_callout_zh: the first Answer leads to one Categorize, the second to another."""
    graph = canvas2graph.compile(old("HR_callout_zh.json"), checkpointer=InMemorySaver(), default_llm=LLM)
    first = await turn(graph, "hr", "你好", script("interested"))
    assert "categorize:0" in ran(first) and "Answer:TwentyMugsDeny__mark" in ran(first)
    second = await turn(graph, "hr", "工资多少？", script("answer"))
    assert "categorize:1" in ran(second) and "categorize:0" not in ran(second)


def test_old_search_services_get_a_keyless_substitute_with_a_warning():
    dsl, notes = migrate_legacy(old("websearch_assistant.json")["dsl"])
    assert dsl["components"]["Baidu:OliveAreasCall"]["obj"]["component_name"] == "DuckDuckGo"
    said = [n for n in notes if n.component_id == "Baidu:OliveAreasCall"]
    assert said and said[0].severity == "warning" and "DuckDuckGo" in said[0].message


def test_an_old_iteration_without_one_input_is_refused_naming_it():
    dsl = old("research_report.json")["dsl"]
    dsl["components"]["Iteration:BlueClothsGrab"]["obj"]["params"]["query"] = []
    for cpn in dsl["components"].values():
        cpn["downstream"] = [d for d in cpn["downstream"] if d != "Iteration:BlueClothsGrab"]
    with pytest.raises(CompileError) as err:
        load_dsl({"components": dsl["components"]}, default_llm=LLM)
    errors = [(d.code, d.component_id) for d in err.value.diagnostics if d.severity == "error"]
    assert errors == [("legacy-unsupported", "Iteration:BlueClothsGrab")]


def test_the_migration_leaves_the_old_canvas_untouched():
    doc = old("general_chat_bot.json")
    before = json.dumps(doc, sort_keys=True)
    migrate_legacy(doc["dsl"])
    assert json.dumps(doc, sort_keys=True) == before


# --- broken old canvases: a diagnostic, never a traceback ----------------------------------------------

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

ODD = st.one_of(st.none(), st.integers(), st.text(max_size=8), st.lists(st.text(max_size=4), max_size=3),
                st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2))
PLACES = st.sampled_from(["downstream", "parent_id", "obj.params", "obj.params.query", "obj.params.prompt",
                          "obj.params.category_description", "obj.params.conditions", "obj.params.delimiter",
                          "obj.params.parameters", "obj.params.messages", "obj.params.post_answers",
                          "obj.params.end_cpn_id", "obj.params.arguments", "obj.component_name"])


def _plant(doc: dict, cid: str, place: str, value) -> None:
    target = doc["components"][cid]
    *path, last = place.split(".")
    for key in path:
        if not isinstance(target.get(key), dict):
            return
        target = target[key]
    target[last] = value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(template=st.sampled_from(TEMPLATES), data=st.data())
def test_an_old_canvas_with_odd_values_gets_diagnostics_not_a_crash(template, data):
    doc = old(template.name)["dsl"]
    for _ in range(data.draw(st.integers(1, 3))):
        cid = data.draw(st.sampled_from(sorted(doc["components"])))
        _plant(doc, cid, data.draw(PLACES), data.draw(ODD))
    try:
        canvas2graph.load(doc, default_llm=LLM)
    except CompileError as e:
        assert all(d.message for d in e.diagnostics)
