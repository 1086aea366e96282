"""`canvas2graph record` turns a session that ran into a case folder, and `canvas2graph test` runs it
again: a recorded session passes; a changed prompt or branch fails saying what differs; `--update`
rewrites the expectations; `--junit` writes a report CI systems parse."""
from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.server.backend.agent_tests.case import load_case
from canvas2graph.server.backend.agent_tests.record import record_session, write_case
from canvas2graph.server.backend.agent_tests.replay import run_case
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.cli import main
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn

REPO = Path(__file__).resolve().parents[4]
DEMO = REPO / "fixtures" / "demo" / "support_desk.json"
DEMO_SCRIPT = REPO / "fixtures" / "demo" / "support_desk.script.json"


@pytest.fixture(autouse=True)
def own_files(tmp_path, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_FILES_DIR", str(tmp_path / "files"))


def changed_demo(tmp_path: Path, name: str, change) -> str:
    dsl = json.loads(DEMO.read_text())
    change(dsl["components"])
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(dsl))
    return str(path)


@pytest.fixture
def recorded(tmp_path, capsys) -> Path:
    """Two turns of the demo run with `canvas2graph run` (a SQLite session), recorded as a case."""
    db = str(tmp_path / "sessions.db")
    for query in ("Why was I charged twice this month?", "And when is it refunded?"):
        assert main(["run", str(DEMO), "--llm-script", str(DEMO_SCRIPT), "--query", query, "--session", "s1",
                     "--db", db]) == 0
    assert main(["record", "--session", "s1", "--db", db, "--dsl", str(DEMO), "--out", str(tmp_path / "case")]) == 0
    capsys.readouterr()
    return tmp_path / "case"


def test_a_recorded_session_is_a_case_folder_of_its_turns_replies_and_expectations(recorded):
    case = json.loads((recorded / "case.json").read_text())
    assert case["format"] == "canvas2graph-case" and case["version"] == 1
    assert case["dsl"] == "agent.json" and json.loads((recorded / "agent.json").read_text()) == json.loads(DEMO.read_text())
    assert [t["query"] for t in case["turns"]] == ["Why was I charged twice this month?", "And when is it refunded?"]
    first = case["turns"][0]["expect"]
    assert first["status"] == "finished"
    assert first["path"] == ["begin", "Categorize:Desk", "LLM:Billing", "Message:Answer"]
    assert first["answer"].startswith("Desk: (billing)\n")
    assert first["components"]["Categorize:Desk"] == {"outputs": {"category_name": "billing"}}
    assert first["components"]["LLM:Billing"]["messages"][0] == {
        "role": "system", "content": "You are a billing specialist. Answer in two sentences."}
    script = json.loads((recorded / "script.json").read_text())
    reply = {"content": "You were charged twice because the first payment timed out and was retried. The duplicate "
                        "charge is refunded within five working days.",
             "reasoning": "The customer sees two charges; a retried payment is the usual cause."}
    assert script == {"by_component": {"Categorize:Desk": ["billing", "billing"], "LLM:Billing": [reply, reply]}}


def test_a_recorded_session_replays_as_a_passing_case(recorded, tmp_path, capsys):
    assert main(["test", str(recorded), "--junit", str(tmp_path / "junit.xml")]) == 0
    out = capsys.readouterr().out
    assert f"PASS session s1 ({recorded})" in out and "1 case(s): 1 passed, 0 failed" in out
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "1" and suite.get("failures") == "0"
    assert suite.find("testcase").get("name") == "session s1" and suite.find("testcase/failure") is None


def test_a_changed_prompt_fails_naming_the_prompt_that_differs(recorded, tmp_path, capsys):
    def one_sentence(components):
        components["LLM:Billing"]["obj"]["params"]["sys_prompt"] = "You are a billing specialist. Answer in one sentence."
    changed = changed_demo(tmp_path, "prompt", one_sentence)
    assert main(["test", str(recorded), "--dsl", changed, "--junit", str(tmp_path / "junit.xml")]) == 1
    out = capsys.readouterr().out
    assert f"FAIL session s1 ({recorded})" in out
    assert ('turn 1: LLM:Billing prompt[0].content expected "You are a billing specialist. Answer in two sentences.", '
            'got "You are a billing specialist. Answer in one sentence."') in out
    assert "1 case(s): 0 passed, 1 failed" in out
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    failure = suite.find("testcase/failure")
    assert suite.get("failures") == "1" and "LLM:Billing prompt[0].content" in failure.text


def test_a_changed_branch_fails_with_the_path_taken_and_the_component_that_no_longer_runs(recorded, tmp_path, capsys):
    def billing_to_technical(components):
        components["Categorize:Desk"]["obj"]["params"]["category_description"]["billing"]["to"] = ["LLM:Technical"]
    assert main(["test", str(recorded), "--dsl", changed_demo(tmp_path, "branch", billing_to_technical)]) == 1
    out = capsys.readouterr().out
    assert ("turn 1: path: expected begin > Categorize:Desk > LLM:Billing > Message:Answer\n"
            "      got      begin > Categorize:Desk > LLM:Technical > Message:Answer") in out
    assert "turn 1: component LLM:Billing did not run" in out
    # the script has no reply for the new branch's model: the turn failed, and the case says why
    assert "turn 1: status expected \"finished\", got \"failed\"" in out
    assert "no reply left for component 'LLM:Technical'" in out


def test_update_rewrites_what_changed_and_keeps_the_expectations_that_still_hold(recorded, tmp_path, capsys):
    case = json.loads((recorded / "case.json").read_text())
    case["turns"][0]["expect"]["answer"] = {"contains": "refunded within five working days"}
    (recorded / "case.json").write_text(json.dumps(case))
    def no_desk(components):
        components["Message:Answer"]["obj"]["params"]["content"] = ["{LLM:Billing@content}{LLM:Technical@content}"]
    changed = changed_demo(tmp_path, "nodesk", no_desk)
    assert main(["test", str(recorded), "--dsl", changed]) == 1
    assert main(["test", str(recorded), "--dsl", changed, "--update"]) == 0
    assert "1 case(s): 1 updated, 0 unchanged" in capsys.readouterr().out
    updated = json.loads((recorded / "case.json").read_text())
    assert updated["turns"][0]["expect"]["answer"] == {"contains": "refunded within five working days"}
    assert not updated["turns"][1]["expect"]["answer"].startswith("Desk:")
    assert main(["test", str(recorded), "--dsl", changed]) == 0


def test_a_broken_case_is_refused_naming_the_file_and_field(tmp_path, capsys):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "agent.json").write_text(DEMO.read_text())
    (folder / "case.json").write_text(json.dumps({"format": "canvas2graph-case", "version": 1, "dsl": "agent.json",
                                                  "turns": [{"query": "Hi", "expect": {"anwser": "Hello"}}]}))
    assert main(["test", str(folder)]) == 2
    assert capsys.readouterr().err.strip() == (f"canvas2graph: {folder / 'case.json'}: `turns[0].expect`: unknown key(s) "
                                               "anwser (known: status, answer, path, events, components)")
    (folder / "case.json").write_text(json.dumps({"format": "canvas2graph-case", "version": 2, "dsl": "agent.json",
                                                  "turns": [{"query": "Hi"}]}))
    assert main(["test", str(folder)]) == 2
    assert "`version`: this canvas2graph reads case format version 1, not 2" in capsys.readouterr().err


# --- a session with a form and an Agent's tool calls -----------------------------------------------
FORM = {"topic": {"type": "line", "name": "Topic", "optional": False}}
RETRIEVAL_TOOL = {"component_name": "Retrieval", "name": "KB search", "params": {"dataset_ids": ["kb-1"]}}
TOOL_AGENT = {"components": {
    "begin": cpn("Begin", downstream=["UserFillUp:Ask"]),
    "UserFillUp:Ask": cpn("UserFillUp", {"enable_tips": True, "tips": "Which topic?", "inputs": FORM}, ["Agent:A"]),
    "Agent:A": cpn("Agent", {"llm_id": "m@OpenAI", "sys_prompt": "Answer from the knowledge base.", "cite": False,
                             "prompts": [{"role": "user", "content": "{UserFillUp:Ask@topic}"}], "max_rounds": 3,
                             "tools": [RETRIEVAL_TOOL]}, ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{Agent:A@content}"]})}}


async def test_a_session_with_a_form_and_tool_calls_records_them_and_replays(tmp_path):
    db = str(tmp_path / "sessions.db")
    (tmp_path / "agent.json").write_text(json.dumps(TOOL_AGENT))
    script = Script.load({"by_component": {"Agent:A": [
        {"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "pricing"}}]},
        "Plans start at 10 euros."]},
        "tool_results": {"search_my_dateset_0": ["Pricing: plans start at 10 euros a month."]}})
    async with open_checkpointer(db) as saver:
        runner = Runner(compile_dsl(TOOL_AGENT), saver, ModelFactory(script=script), script)
        [e async for e in runner.run_turn("s2", TurnRequest(query="hello"))]
        assert runner.outcome.status == "paused"
        [e async for e in runner.run_turn("s2", TurnRequest(inputs={"topic": {"value": "pricing"}}))]
        assert runner.outcome.status == "finished"
    files = await record_session("s2", db=db, dsl=str(tmp_path / "agent.json"))
    case, recorded_script = files["case.json"], files["script.json"]
    assert [t["expect"]["status"] for t in case["turns"]] == ["paused", "finished"]
    assert case["turns"][1]["inputs"] == {"topic": "pricing"}         # the form's answer, what the turn was asked
    assert case["turns"][1]["expect"]["answer"] == "Plans start at 10 euros."   # the answer: no tool notice
    assert recorded_script["by_component"]["Agent:A"] == [
        {"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "pricing"}}]}, "Plans start at 10 euros."]
    assert recorded_script["tool_results"] == {"search_my_dateset_0": ["Pricing: plans start at 10 euros a month."]}
    folder = write_case(files, tmp_path / "case")
    result = await run_case(load_case(folder))
    assert result.passed, result.report()


async def test_a_case_can_name_a_stored_agent_instead_of_a_dsl_file(recorded, tmp_path):
    from canvas2graph.server.backend.store import open_store
    db = str(tmp_path / "server.db")
    async with open_store(db) as store:
        agent = await store.create_agent("alice", "support desk", json.loads(DEMO.read_text()))
    case = json.loads((recorded / "case.json").read_text())
    del case["dsl"]
    case["agent"] = {"id": agent.id}
    (recorded / "case.json").write_text(json.dumps(case))
    (recorded / "agent.json").unlink()
    result = await run_case(load_case(recorded), db=db)
    assert result.passed, result.report()
    assert result.dsl == f"agent {agent.id}"
    case["agent"] = {"id": "no-such-agent"}
    (recorded / "case.json").write_text(json.dumps(case))
    result = await run_case(load_case(recorded), db=db)
    assert not result.passed and result.error == f"{recorded / 'case.json'}: `agent`: {db} has no agent no-such-agent"


async def test_a_turn_uploads_the_files_it_lists_from_the_case_folder(tmp_path):
    folder = tmp_path / "with_file"
    (folder / "files").mkdir(parents=True)
    (folder / "files" / "note.txt").write_text("hello file")
    (folder / "agent.json").write_text(json.dumps({"components": {
        "begin": cpn("Begin", downstream=["Message:M"]), "Message:M": cpn("Message", {"content": ["Files: {sys.files}"]})}}))
    (folder / "case.json").write_text(json.dumps({
        "format": "canvas2graph-case", "version": 1, "dsl": "agent.json",
        "turns": [{"query": "see", "files": ["files/note.txt"],
                   "expect": {"answer": {"regex": r"File: note\.txt.*hello file"}}}]}))
    result = await run_case(load_case(folder))
    assert result.passed, result.report()


SEARCHING = {"components": {
    "begin": cpn("Begin", downstream=["TavilySearch:Web"]),
    "TavilySearch:Web": cpn("TavilySearch", {"api_key": "unused", "query": "{sys.query}"}, ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Found: {TavilySearch:Web@formalized_content}"]})}}


async def test_a_tool_on_the_canvas_replays_its_recorded_outputs_without_calling_the_service(tmp_path):
    db = str(tmp_path / "sessions.db")
    (tmp_path / "agent.json").write_text(json.dumps(SEARCHING))
    script = Script.load({"tool_results": {"TavilySearch:Web": [{"outputs": {"formalized_content": "three pages"}}]}})
    async with open_checkpointer(db) as saver:
        runner = Runner(compile_dsl(SEARCHING), saver, ModelFactory(script=script), script)
        [e async for e in runner.run_turn("s3", TurnRequest(query="canvas agents"))]
        assert runner.outcome.status == "finished"
    files = await record_session("s3", db=db, dsl=str(tmp_path / "agent.json"))
    assert files["script.json"]["tool_results"]["TavilySearch:Web"] == [{"outputs": {"formalized_content": "three pages"}}]
    assert files["case.json"]["turns"][0]["expect"]["answer"] == "Found:three pages"
    result = await run_case(load_case(write_case(files, tmp_path / "case")))     # no network: the script answers
    assert result.passed, result.report()


def test_a_session_with_live_models_records_their_replies_and_replays_offline(tmp_path, monkeypatch, capsys):
    """The models answer over the provider's protocol (a local OpenAI-compatible server); the case then
    replays without it, from what they answered."""
    from tests.openai_server import OpenAIServer
    for name in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    dsl = json.loads(DEMO.read_text())
    for cid in ("Categorize:Desk", "LLM:Billing", "LLM:Technical"):
        dsl["components"][cid]["obj"]["params"]["llm_id"] = "my-model@OpenAI-API-Compatible"
    (tmp_path / "live.json").write_text(json.dumps(dsl))
    db = str(tmp_path / "sessions.db")
    with OpenAIServer(["technical", "Restart the app, then update it."]) as server:
        monkeypatch.setenv("OPENAI_API_COMPATIBLE_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_COMPATIBLE_API_KEY", "sk-local")
        assert main(["run", str(tmp_path / "live.json"), "--query", "The app crashes", "--session", "live", "--db", db]) == 0
        assert len(server.requests) == 2
    assert main(["record", "--session", "live", "--db", db, "--dsl", str(tmp_path / "live.json"),
                 "--out", str(tmp_path / "case")]) == 0
    script = json.loads((tmp_path / "case" / "script.json").read_text())
    assert script["by_component"] == {"Categorize:Desk": ["technical"], "LLM:Technical": ["Restart the app, then update it."]}
    capsys.readouterr()
    assert main(["test", str(tmp_path / "case")]) == 0          # the provider is gone: the script answers
    assert "1 case(s): 1 passed, 0 failed" in capsys.readouterr().out
