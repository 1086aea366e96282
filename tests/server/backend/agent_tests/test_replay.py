"""A hand-written case, as a reviewer reads one: events found in order, outputs compared as JSON subsets,
a path compared by the components it must go through, and each mismatch said in one line."""
from __future__ import annotations

import json

import pytest

from canvas2graph.server.backend.agent_tests.case import load_case
from canvas2graph.server.backend.agent_tests.replay import run_case
from tests.conftest import cpn

DESK = {"components": {
    "begin": cpn("Begin", downstream=["Categorize:Desk"]),
    "Categorize:Desk": cpn("Categorize", {"llm_id": "m@OpenAI", "query": "sys.query", "category_description": {
        "billing": {"description": "Money.", "to": ["LLM:Billing"]},
        "other": {"description": "Anything else.", "to": ["Message:Other"]}}}),
    "LLM:Billing": cpn("LLM", {"llm_id": "m@OpenAI", "sys_prompt": "Be brief.",
                               "prompts": [{"role": "user", "content": "{sys.query}"}]}, ["Message:Answer"]),
    "Message:Answer": cpn("Message", {"content": ["{LLM:Billing@content}"]}),
    "Message:Other": cpn("Message", {"content": ["Not for us."]})}}


@pytest.fixture(autouse=True)
def own_files(tmp_path, monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_FILES_DIR", str(tmp_path / "files"))


def write_case(tmp_path, expect: dict) -> str:
    folder = tmp_path / "case"
    folder.mkdir(exist_ok=True)
    (folder / "agent.json").write_text(json.dumps(DESK))
    (folder / "case.json").write_text(json.dumps({
        "format": "canvas2graph-case", "version": 1, "name": "desk", "dsl": "agent.json",
        "script": {"by_component": {"Categorize:Desk": ["billing"], "LLM:Billing": ["Refunded in 5 days."]}},
        "turns": [{"query": "charged twice", "expect": expect}]}))
    return str(folder)


async def test_events_outputs_and_path_expectations_that_hold_pass(tmp_path):
    folder = write_case(tmp_path, {
        "status": "finished",
        "answer": {"regex": r"^Refunded in \d+ days\.$"},
        "path": {"contains": ["Categorize:Desk", "Message:Answer"]},
        "events": [{"event": "workflow_started"},
                   {"event": "node_finished", "data": {"component_id": "Categorize:Desk"}},
                   {"event": "message_end"},
                   {"event": "workflow_finished", "data": {"outputs": {"content": "Refunded in 5 days."}}}],
        "components": {"Categorize:Desk": {"outputs": {"category_name": {"exact": "billing"}}},
                       "LLM:Billing": {"outputs": {"content": {"contains": "5 days"}},
                                       "messages": {"json": [{"role": "system", "content": "Be brief."},
                                                             {"role": "user", "content": "charged twice"}]}}}})
    result = await run_case(load_case(folder))
    assert result.passed, result.report()


async def test_expectations_that_do_not_hold_say_what_differs(tmp_path):
    folder = write_case(tmp_path, {
        "events": [{"event": "message_end"}, {"event": "node_finished", "data": {"component_id": "Categorize:Desk"}}],
        "components": {"Categorize:Desk": {"outputs": {"category_name": {"json": "other"}, "missing": 1}},
                       "Message:Other": {"outputs": {"content": "Not for us."}}}})
    result = await run_case(load_case(folder))
    assert not result.passed
    lines = result.report().splitlines()
    assert lines[0].startswith('turn 1: events[1]: no event like {"event": "node_finished", "data": '
                               '{"component_id": "Categorize:Desk"}} (events from there: ')
    assert lines[1:] == ['turn 1: Categorize:Desk output category_name: the value: expected "other", got "billing"',
                         "turn 1: Categorize:Desk output missing: missing (its outputs: category_name)",
                         "turn 1: component Message:Other did not run"]
