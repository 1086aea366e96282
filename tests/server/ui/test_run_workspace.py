"""The run view as a workspace, at 1440x900 on the support desk (fixtures/ui/support_router.json, 21
components), in Debian's Chromium against a real `canvas2graph serve`: a resizable split between the chat
and the graph, node text readable at the default zoom with a minimap, a box's step in a drawer beside the
chat, a fork as a sibling version of the turn it ran again, Markdown in form tips and errors, and each
session listed with how its last turn ended."""
from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from tests.server.helpers import REPO, Api, cpn
from tests.server.ui.test_inspector import box, component, open_agent, send

SUPPORT_DESK = json.loads((REPO / "fixtures" / "ui" / "support_router.json").read_text())

# LLM:Sleepy answers slowly (conftest's by_message rule): long enough to stop its turn
SLEEPY_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:Sleepy"]),
    "LLM:Sleepy": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                      ["Message:Sleepy"]),
    "Message:Sleepy": cpn("Message", {"content": ["{LLM:Sleepy@content}"]}),
}}


def wide(browsing, token: str):
    b = browsing(width=1440)
    b.page.set_viewport_size({"width": 1440, "height": 900})
    b.sign_in(token)
    return b


def at_support_desk(browsing, ui_server, token: str, title: str):
    agent_id = Api(ui_server, token).agent(SUPPORT_DESK, title)
    b = wide(browsing, token)
    open_agent(b, title)
    return b, agent_id


def finished(b) -> None:
    expect(b.page.get_by_role("status").filter(has_text=re.compile(r"^Finished"))).to_be_visible()


def width(b, selector: str) -> float:
    return b.page.locator(selector).bounding_box()["width"]


def zoom(b) -> float:
    style = b.page.locator(".graph .react-flow__viewport").get_attribute("style") or ""
    return float(re.search(r"scale\(([\d.]+)\)", style).group(1))


# --- the split ----------------------------------------------------------------------------------------
def test_the_graph_takes_most_of_the_width_and_the_split_moves_by_drag_and_arrow_keys_and_is_remembered(
        browsing, ui_server, alice_token):
    b, _ = at_support_desk(browsing, ui_server, alice_token, "Split desk")
    assert width(b, "section.graph") > 1.6 * width(b, "section.chat")
    divider = b.page.get_by_role("separator", name="Resize the chat and the graph")
    start = width(b, "section.chat")
    divider.focus()
    for _ in range(4):
        b.page.keyboard.press("ArrowRight")
    assert width(b, "section.chat") >= start + 60
    expect(divider).to_have_attribute("aria-valuenow", str(round(width(b, "section.chat"))))
    # dragged back, 150 px to the left of where it was
    before = width(b, "section.chat")
    handle = divider.bounding_box()
    x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    b.page.mouse.move(x, y)
    b.page.mouse.down()
    b.page.mouse.move(x - 150, y, steps=6)
    b.page.mouse.up()
    dragged = width(b, "section.chat")
    assert abs(dragged - (before - 150)) <= 4
    b.shot("split-dragged", full_page=False)
    b.page.reload()
    expect(b.page.locator(".react-flow__node .c2g-node").first).to_be_visible()
    assert abs(width(b, "section.chat") - dragged) <= 2                     # remembered
    # the chat folds away, leaving the graph the whole width, and comes back
    b.page.get_by_role("button", name="Hide the chat").click()
    expect(b.page.locator("section.chat")).to_be_hidden()
    assert width(b, "section.graph") > 1000
    b.page.get_by_role("button", name="Show the chat").click()
    expect(b.page.get_by_role("textbox", name="Your message")).to_be_visible()
    assert b.errors == []


# --- the default zoom -----------------------------------------------------------------------------------
def test_node_text_is_readable_at_the_default_zoom_with_the_start_in_view_and_a_minimap(browsing, ui_server, alice_token):
    b, _ = at_support_desk(browsing, ui_server, alice_token, "Readable desk")
    b.page.wait_for_function("""() => {             // the canvas has placed its first view
        const v = document.querySelector('.graph .react-flow__viewport');
        return v && !/translate\\(0px, 0px\\) scale\\(1\\)/.test(v.getAttribute('style') || '');
    }""")
    name = box(b, "begin").locator(".node-name")
    on_screen = name.evaluate("e => parseFloat(getComputedStyle(e).fontSize)") * zoom(b)
    assert on_screen >= 11, f"the boxes' names are {on_screen:.1f} px on screen"
    expect(box(b, "begin")).to_be_in_viewport()
    expect(box(b, "Categorize:Triage")).to_be_in_viewport()
    expect(b.page.locator(".graph .react-flow__minimap")).to_be_visible()
    b.shot("readable-zoom", full_page=False)
    # the component that runs is brought into view (the billing branch sits off to one side)
    send(b, "I was charged twice")
    finished(b)
    expect(box(b, "Message:Billing")).to_be_in_viewport()
    assert box(b, "Message:Billing").locator(".node-name").evaluate("e => parseFloat(getComputedStyle(e).fontSize)") * zoom(b) >= 11
    assert b.errors == []


# --- the step drawer -----------------------------------------------------------------------------------
def test_a_click_on_a_box_opens_its_step_in_a_drawer_beside_the_chat_and_escape_closes_it(browsing, ui_server, alice_token):
    b, _ = at_support_desk(browsing, ui_server, alice_token, "Drawer desk")
    send(b, "hello there")
    finished(b)
    page_url = b.page.url
    box(b, "Categorize:Triage").click()
    drawer = b.page.get_by_role("dialog", name="Step of Categorize:Triage")
    expect(drawer).to_be_visible()
    expect(drawer.locator(".trace-block").filter(has_text="Inputs")).to_contain_text("hello there")
    expect(drawer.locator(".trace-block").filter(has_text="Outputs")).to_contain_text("smalltalk")
    expect(drawer.locator(".trace-block").filter(has_text="Usage")).to_contain_text(re.compile(r"\d+ in / \d+ out"))
    expect(drawer).to_contain_text(re.compile(r"\d+ (ms|s)"))
    # the chat stays on the page, beside the drawer
    expect(b.page.locator(".message.user").filter(has_text="hello there")).to_be_visible()
    assert drawer.bounding_box()["x"] >= b.page.locator("section.chat").bounding_box()["x"] + width(b, "section.chat")
    assert b.page.url == page_url
    picked = box(b, "Categorize:Triage").bounding_box()             # the box stays in view, left of the drawer
    assert picked["x"] >= b.page.locator(".graph .canvas").bounding_box()["x"]
    assert picked["x"] + picked["width"] <= drawer.bounding_box()["x"]
    expect(drawer.get_by_role("link", name="Open the full trace")).to_have_attribute(
        "href", re.compile(r"/trace/Categorize%3ATriage$"))
    b.shot("step-drawer", full_page=False)
    b.page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    # by keyboard from the component list, closed by its button
    b.page.get_by_role("button", name="Open the step of Message:Hello").focus()
    b.page.keyboard.press("Enter")
    hello = b.page.get_by_role("dialog", name="Step of Message:Hello")
    expect(hello).to_be_visible()
    hello.get_by_role("button", name="Close the step").click()
    expect(hello).to_be_hidden()
    expect(b.page.get_by_role("button", name="Open the step of Message:Hello")).to_be_focused()
    # the full trace stays one link away
    box(b, "Categorize:Triage").click()
    drawer.get_by_role("link", name="Open the full trace").click()
    expect(b.page.locator('details.step[data-component="Categorize:Triage"]')).to_have_attribute("open", "")
    assert b.errors == []


def test_a_component_that_did_not_run_says_so_in_the_drawer(browsing, ui_server, alice_token):
    b, _ = at_support_desk(browsing, ui_server, alice_token, "Unrun desk")
    box(b, "LLM:Legal").click()
    drawer = b.page.get_by_role("dialog", name="Step of LLM:Legal")
    expect(drawer).to_contain_text("Run the agent first")
    send(b, "hello there")
    finished(b)
    box(b, "LLM:Legal").click()
    expect(drawer).to_contain_text("LLM:Legal did not run in this session")
    assert b.errors == []


# --- forks ---------------------------------------------------------------------------------------------
def test_a_fork_is_a_sibling_version_of_the_turn_it_ran_again_and_the_chat_shows_one_version_at_a_time(
        browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(SUPPORT_DESK, "Forked desk")
    first = alice.stream("/agents/chat/completions", {"agent_id": agent_id, "query": "hello", "stream": True})
    session_id = first[0]["session_id"]
    alice.stream("/agents/chat/completions", {"agent_id": agent_id, "query": "I was charged twice", "stream": True,
                                              "session_id": session_id})
    old_answer = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}")["messages"][-1]["content"]
    # turn 2 again from its Categorize, asked differently: a greeting this time
    turn = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}/trace")["turns"][1]
    step = next(s for s in turn["steps"] if s["component_id"] == "Categorize:Triage")
    alice.stream(f"/agents/{agent_id}/sessions/{session_id}/fork",
                 {"checkpoint_id": step["checkpoint_id"], "inputs": {"sys.query": "hello again"}, "stream": True})
    greeting = alice.ok("GET", f"/agents/{agent_id}/sessions/{session_id}")["messages"][-1]["content"]
    assert greeting != old_answer

    b = wide(browsing, alice_token)
    b.page.goto(f"{b.server.url}/#/agents/{agent_id}/sessions/{session_id}")
    chat = b.page.locator("section.chat")
    versions = chat.get_by_role("group", name="Versions of turn 2")
    expect(versions).to_contain_text("2/2")
    expect(versions).to_contain_text("run again from Categorize:Triage")
    # turn 2 once, as the fork asked it, with the fork's answer only
    expect(chat.locator(".message.user .text")).to_have_text(["hello", "hello again"])
    expect(chat.locator(".message.assistant").filter(has_text=greeting)).to_have_count(2)     # turns 1 and 2
    expect(chat.locator(".message.assistant").filter(has_text=old_answer)).to_have_count(0)
    expect(chat).not_to_contain_text("Turn 3")
    expect(component(b, "Message:Hello")).to_have_attribute("data-state", "done")
    b.shot("fork-version-2", full_page=False)
    previous = versions.get_by_role("button", name="Previous version of turn 2")
    previous.click()
    expect(versions).to_contain_text("1/2")
    expect(previous).to_be_focused()                    # the switcher stays put under the keyboard
    expect(chat.locator(".message.user .text")).to_have_text(["hello", "I was charged twice"])
    expect(chat.locator(".message.assistant").filter(has_text=old_answer)).to_have_count(1)
    expect(chat.locator(".message.assistant").filter(has_text=greeting)).to_have_count(1)
    # the canvas shows the version shown: the billing branch ran, the greeting did not
    expect(component(b, "LLM:Billing")).to_have_attribute("data-state", "done")
    expect(component(b, "Message:Hello")).to_have_attribute("data-state", "skipped")
    b.shot("fork-version-1", full_page=False)
    versions.get_by_role("button", name="Next version of turn 2").click()
    expect(versions).to_contain_text("2/2")
    expect(chat.locator(".message.assistant").filter(has_text=old_answer)).to_have_count(0)
    expect(component(b, "Message:Hello")).to_have_attribute("data-state", "done")
    expect(component(b, "LLM:Billing")).to_have_attribute("data-state", "skipped")
    # the trace numbers the fork as the turn it ran again
    b.page.goto(f"{b.server.url}/#/agents/{agent_id}/sessions/{session_id}/trace")
    turns = b.page.locator("section.turn")
    expect(turns).to_have_count(2)
    expect(turns.nth(1).locator("h2")).to_have_text("Turn 2: hello again")
    expect(b.page.locator("main")).not_to_contain_text("Turn 3")
    expect(turns.nth(1)).to_contain_text("version 2 of 2")
    b.shot("fork-trace", full_page=False)
    assert b.errors == []


# --- Markdown in tips and errors -------------------------------------------------------------------------
def test_a_forms_tips_render_markdown(browsing, ui_server, alice_token):
    b, _ = at_support_desk(browsing, ui_server, alice_token, "Tips desk")
    send(b, "I want to buy the team plan")
    tips = b.page.locator("form.inputs-form .tips")
    expect(tips.locator("strong")).to_have_text("Almost done.")
    expect(tips).not_to_contain_text("**")
    expect(tips).to_contain_text("Where can sales reach you?")
    b.shot("markdown-tips", full_page=False)
    # a form waiting in a hidden chat shows the chat (reopened, the paused session asks again)
    b.page.get_by_role("button", name="Hide the chat").click()
    b.page.reload()
    expect(tips.locator("strong")).to_have_text("Almost done.")
    expect(b.page.get_by_role("button", name="Hide the chat")).to_be_visible()
    assert b.errors == []


def test_errors_render_markdown_in_the_chat_and_in_the_step_drawer(browsing, ui_server, alice_token):
    b, _ = at_support_desk(browsing, ui_server, alice_token, "Errors desk")
    send(b, "a question about my contract")
    alert = b.page.locator("section.chat .message[role=alert]").first
    expect(alert.locator("strong").first).to_have_text("ERROR")
    expect(alert.locator("code")).to_have_text("down")
    expect(alert).not_to_contain_text("**")
    failed = b.page.locator('ol.states li[data-state="error"]')
    expect(failed).to_have_count(1)
    failed_id = failed.get_attribute("data-component")
    box(b, failed_id).click()
    drawer = b.page.get_by_role("dialog", name=f"Step of {failed_id}")
    expect(drawer.locator(".step-error strong").first).to_have_text("ERROR")
    expect(drawer.locator(".step-error")).not_to_contain_text("**")
    b.shot("markdown-errors", full_page=False)
    assert b.errors == []


# --- session statuses ------------------------------------------------------------------------------------
def test_sessions_are_listed_as_failed_waiting_for_input_stopped_or_answered(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(SUPPORT_DESK, "Status desk")
    for query in ("a question about my contract", "I want to buy the team plan", "hello"):
        alice.stream("/agents/chat/completions", {"agent_id": agent_id, "query": query, "stream": True})
    b = wide(browsing, alice_token)
    open_agent(b, "Status desk")
    meta = lambda title: b.page.locator("a[data-session-id]").filter(has_text=title).locator(".session-meta")  # noqa: E731
    expect(meta("my contract")).to_contain_text("failed")
    expect(meta("team plan")).to_contain_text("waiting for input")
    expect(meta("hello")).to_contain_text("answered")
    for title in ("my contract", "team plan", "hello"):
        expect(meta(title)).not_to_contain_text("waiting or stopped")
    b.shot("session-statuses", full_page=False)
    # a turn stopped by Cancel
    Api(ui_server, alice_token).agent(SLEEPY_DSL, "Stopped desk")
    b.page.goto(f"{b.server.url}/#/agents")
    open_agent(b, "Stopped desk")
    send(b, "take your time")
    expect(component(b, "LLM:Sleepy")).to_have_attribute("data-state", "running")
    box(b, "LLM:Sleepy").click()                     # a running component's step comes when it ends
    expect(b.page.get_by_role("dialog", name="Step of LLM:Sleepy")).to_contain_text("LLM:Sleepy is running")
    b.page.keyboard.press("Escape")
    b.page.get_by_role("button", name="Cancel").click()
    expect(b.page.get_by_role("status").filter(has_text="Cancelled.")).to_be_visible(timeout=30_000)
    stopped = b.page.locator("a[data-session-id]").filter(has_text="take your time").locator(".session-meta")
    expect(stopped).to_contain_text(re.compile(r"· stopped"))
    expect(stopped).not_to_contain_text("waiting")
    assert b.errors == []
