"""The trace, time travel, sessions and agents pages in Debian's Chromium against a real `canvas2graph
serve`: steps as readable fields numbered per turn with a raw switch, a failed step opened with what it
was given, a fork's branches with a switcher, and the sessions and agents lists."""
from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from tests.server.helpers import FAILING_DSL, Api
from tests.server.ui.test_inspector import CHAT_DSL, component, open_agent


def ask(api: Api, agent_id: str, query: str, session_id: str | None = None) -> str:
    body = {"agent_id": agent_id, "query": query, "stream": True}
    if session_id:
        body["session_id"] = session_id
    return api.stream("/agents/chat/completions", body)[0]["session_id"]


def open_trace(browsing, token: str, agent_id: str, session_id: str, width: int = 1280):
    b = browsing(width=width)
    b.sign_in(token)
    b.page.goto(f"{b.server.url}/#/agents/{agent_id}/sessions/{session_id}/trace")
    expect(b.page.locator("section.turn").first).to_be_visible()
    return b


def test_steps_read_as_fields_numbered_per_turn_with_a_raw_switch(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(CHAT_DSL, "Readable trace")
    session_id = ask(alice, agent_id, "first line\nsecond line")
    ask(alice, agent_id, "again", session_id)
    b = open_trace(browsing, alice_token, agent_id, session_id)
    turns = b.page.locator("section.turn")
    expect(turns).to_have_count(2)
    for turn in (turns.nth(0), turns.nth(1)):           # numbered per turn
        expect(turn.locator(".step-no")).to_have_text(["1.", "2.", "3."])
        expect(turn.locator("time.step-time")).to_have_count(3)
    llm = turns.nth(0).locator('details.step[data-component="LLM:A"]')
    expect(llm.locator("summary .elapsed")).to_have_text(re.compile(r"\d+ in / \d+ out"))
    llm.locator("summary").click()
    query = llm.locator(".trace-block").filter(has_text="Inputs").locator(".text-value").first
    expect(query).to_have_text("first line\nsecond line")
    assert query.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"       # line breaks kept
    expect(llm).not_to_contain_text("_created_time")
    expect(llm.locator(".trace-block").filter(has_text="Usage")).to_contain_text(re.compile(r"\d+ in / \d+ out"))
    b.shot("trace-fields")
    b.page.get_by_label("Raw").check()
    expect(llm.locator("pre.raw")).to_contain_text("_created_time")
    assert b.errors == []


def test_a_failed_step_opens_with_the_step_whose_prompt_failed(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(FAILING_DSL, "Failed trace")
    session_id = ask(alice, agent_id, "break please")
    b = open_trace(browsing, alice_token, agent_id, session_id)
    # the Message streaming the LLM's answer is where the failure shows; the LLM's step, whose prompt
    # failed, opens with it
    failed = b.page.locator("details.step.failed")
    expect(failed).to_have_count(1)
    expect(failed).to_have_attribute("open", "")
    expect(failed).to_contain_text("the provider is down")
    expect(b.page.locator('details.step[data-component="LLM:Fails"]')).to_have_attribute("open", "")
    b.shot("failed-step")


def test_a_fork_leaves_branches_to_switch_between_and_shows_its_edited_question(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(CHAT_DSL, "Branches")
    session_id = ask(alice, agent_id, "first question")
    ask(alice, agent_id, "second question", session_id)
    b = open_trace(browsing, alice_token, agent_id, session_id)
    expect(b.page.get_by_label("Branch", exact=True)).to_have_count(0)           # one branch: nothing to switch
    first = b.page.locator("section.turn").nth(0)
    message = first.locator('details.step[data-component="Message:M"]')
    message.locator("summary").click()
    message.get_by_role("button", name="Run again from here").click()
    inputs = b.page.get_by_label("Inputs (JSON)")
    edited = json.loads(inputs.input_value())
    edited["sys.query"] = "an edited question"
    inputs.fill(json.dumps(edited))
    b.page.get_by_role("button", name="Run the new branch").click()
    expect(b.page.locator("section.fork")).to_contain_text("The new branch finished.")
    # the steps before the fork point stay done on the canvas
    expect(component(b, "begin")).to_have_attribute("data-state", "done")
    expect(component(b, "LLM:A")).to_have_attribute("data-state", "done")
    expect(component(b, "Message:M")).to_have_attribute("data-state", "done")
    # the fork is another version of turn 1, titled with its edited question (on its branch, turn 2 was not
    # asked yet); the branch switcher lists both branches
    turns = b.page.locator("section.turn")
    expect(turns).to_have_count(1)
    expect(turns.nth(0).locator("h2")).to_have_text("Turn 1: an edited question")
    expect(turns.nth(0)).to_contain_text("version 2 of 2")
    switcher = b.page.get_by_label("Branch", exact=True)
    expect(switcher.locator("option")).to_have_count(2)
    b.shot("branches")
    switcher.select_option(index=1)
    expect(turns).to_have_count(2)
    expect(turns.nth(0).locator("h2")).to_have_text("Turn 1: first question")
    expect(turns.nth(1).locator("h2")).to_have_text("Turn 2: second question")
    # the chat shows the fork as a version of turn 1 with its edited question, not the old question again
    b.page.get_by_role("link", name="Back to the chat").click()
    versions = b.page.get_by_role("group", name="Versions of turn 1")
    expect(versions).to_contain_text("2/2")
    expect(versions).to_contain_text("run again from Message:M")
    expect(b.page.locator(".message.user .text")).to_have_text(["an edited question"])
    versions.get_by_role("button", name="Previous version of turn 1").click()
    expect(b.page.locator(".message.user .text")).to_have_text(["first question", "second question"])
    assert b.errors == []


def test_sessions_show_when_and_how_they_went_and_can_be_searched_and_deleted(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(CHAT_DSL, "Sessions list")
    ask(alice, agent_id, "about apples")
    ask(alice, agent_id, "about pears")
    b = browsing()
    b.sign_in(alice_token)
    open_agent(b, "Sessions list")
    sessions = b.page.locator("a[data-session-id]")
    expect(sessions).to_have_count(2)
    expect(sessions.first).to_contain_text(re.compile(r"just now · answered"))
    b.page.get_by_label("Search the sessions").fill("pears")
    expect(sessions).to_have_count(1)
    expect(sessions.first).to_contain_text("about pears")
    b.page.get_by_role("button", name="Delete the session “about pears”").click()
    b.page.get_by_role("button", name="Yes, delete").click()
    b.page.get_by_label("Search the sessions").fill("")
    expect(sessions).to_have_count(1)
    expect(sessions.first).to_contain_text("about apples")
    assert len(alice.ok("GET", f"/agents/{agent_id}/sessions")) == 1
    assert b.errors == []


def test_agents_show_description_component_count_and_last_run(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.ok("POST", "/agents", {"title": "Described", "dsl": CHAT_DSL,
                                            "description": "Answers with what you said."})["id"]
    b = browsing()
    b.sign_in(alice_token)
    row = b.page.locator(f'tr[data-agent-id="{agent_id}"]')
    expect(row).to_contain_text("Answers with what you said.")
    expect(row).to_contain_text("3 components")
    expect(row.locator("td").nth(2)).to_have_text("never")
    ask(alice, agent_id, "now it ran")
    b.page.reload()
    expect(row.locator("td").nth(2)).to_have_text("just now")
    b.shot("agents")
    # later, by the page's clock: minutes up to an hour, then hours (every age from 90 s to 90 min read "1 h ago")
    from datetime import datetime, timedelta
    for later, shown in ((timedelta(seconds=90), "2 min ago"), (timedelta(minutes=50), "50 min ago"),
                         (timedelta(minutes=95), "2 h ago"), (timedelta(hours=30), "1 d ago")):
        b.page.clock.set_fixed_time(datetime.now() + later)
        b.page.reload()
        expect(row.locator("td").nth(2)).to_have_text(shown)


def test_the_trace_reads_at_400_pixels(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(CHAT_DSL, "Narrow trace")
    session_id = ask(alice, agent_id, "narrow")
    b = open_trace(browsing, alice_token, agent_id, session_id, width=400)
    b.page.locator('details.step[data-component="LLM:A"] summary').click()
    assert b.page.evaluate("document.documentElement.scrollWidth") <= 400
    b.shot("narrow-trace")


def test_errors_are_said_in_plain_words_without_codes_or_session_ids(browsing, ui_server, alice_token):
    """A session that is not there, a fork of it, a run page of it: the page says so in words, without the
    API's code or the session id it was asked for."""
    agent_id = Api(ui_server, alice_token).agent(CHAT_DSL, "Plain errors")
    missing = "0123456789abcdef0123456789abcdef"
    b = browsing()
    b.sign_in(alice_token)
    for path in (f"#/agents/{agent_id}/sessions/{missing}/trace", f"#/agents/{agent_id}/sessions/{missing}"):
        b.page.goto(f"{b.server.url}/{path}")
        alert = b.page.get_by_role("alert").first
        expect(alert).to_contain_text("not found")
        text = alert.inner_text()
        assert missing not in text and not re.search(r"\b(code|retcode)\b|\b\d{3,}\b", text), text
    b.shot("plain-error")
    assert b.errors == []
