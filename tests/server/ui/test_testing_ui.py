"""The run inspector's testing pieces (server/ui/static/testing.js), in Chromium: "Save as test" downloads a
session's regression case, and the evaluations page runs a dataset, shows its rows with their scores and
compares two versions row by row."""
from __future__ import annotations

import json
import zipfile

from playwright.sync_api import expect

from tests.server.helpers import Api, cpn

ECHO_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                 ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Echo: {sys.query}"]}),
}}


def test_save_as_test_downloads_the_session_as_a_case_folder(browsing, ui_server, alice_token, tmp_path):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(ECHO_DSL, "Saved as a test")
    events = alice.stream("/agents/chat/completions", {"agent_id": agent_id, "query": "hello", "stream": True})
    session_id = events[0]["session_id"]
    b = browsing()
    b.sign_in(alice_token)
    b.page.goto(f"{ui_server.url}/#/agents/{agent_id}/sessions/{session_id}/trace")
    expect(b.page.locator("section.turn")).to_have_count(1)
    with b.page.expect_download() as download:
        b.page.get_by_role("button", name="Save as test").click()
    path = tmp_path / download.value.suggested_filename
    download.value.save_as(path)
    with zipfile.ZipFile(path) as archive:
        [case_name] = [n for n in archive.namelist() if n.endswith("/case.json")]
        case = json.loads(archive.read(case_name))
    assert case["format"] == "canvas2graph-case" and case["turns"][0]["query"] == "hello"
    assert case["turns"][0]["expect"]["path"] == ["begin", "LLM:A", "Message:M"]
    assert b.errors == []


def test_the_evaluations_page_runs_a_dataset_and_compares_two_versions(browsing, ui_server, alice_token, tmp_path):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(ECHO_DSL, "Evaluated")
    changed = json.loads(json.dumps(ECHO_DSL))
    changed["components"]["Message:M"]["obj"]["params"]["content"] = ["Said: {sys.query}"]
    alice.ok("PUT", f"/agents/{agent_id}", {"dsl": changed})
    newest, oldest = alice.ok("GET", f"/agents/{agent_id}/versions")
    dataset = tmp_path / "rows.csv"
    dataset.write_text("query,expected\nred,Echo:red\nblue,Echo:blue\n<b>bold</b>,Echo:<b>bold</b>\n")
    b = browsing()
    b.sign_in(alice_token)
    b.page.goto(f"{ui_server.url}/#/agents/{agent_id}")
    b.page.get_by_role("link", name="Evaluations").click()
    b.page.get_by_role("heading", name="Evaluations · Evaluated").wait_for()

    b.page.get_by_label("Dataset").set_input_files(str(dataset))
    b.page.get_by_label("Version", exact=True).select_option(oldest["id"])
    b.page.get_by_role("button", name="Run").click()
    rows = b.page.locator("table.evaluation-rows tbody tr")
    expect(rows).to_have_count(3)
    expect(b.page.locator("section[aria-label=Evaluation]")).to_contain_text("score 1 · 3/3 passed")
    expect(rows.nth(2)).to_contain_text("Echo:<b>bold</b>")           # shown as text, never as markup
    assert b.page.locator("main b").count() == 0

    b.page.get_by_label("Version", exact=True).select_option(newest["id"])
    b.page.get_by_role("button", name="Run").click()
    expect(b.page.locator("section[aria-label=Evaluation]")).to_contain_text("score 0 · 0/3 passed")
    expect(b.page.locator("table.evaluations tbody tr")).to_have_count(2)
    for box in b.page.get_by_role("checkbox").all():
        box.check()
    comparison = b.page.locator("section[aria-label=Evaluation]")
    expect(comparison).to_contain_text("3 of 3 rows changed")
    expect(comparison.locator("table.evaluation-rows tbody tr")).to_have_count(3)
    expect(comparison).to_contain_text("Said:red")
    b.shot("evaluations")
    assert b.errors == []
