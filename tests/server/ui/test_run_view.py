"""The run view on its React Flow canvas, in Debian's Chromium against a real `canvas2graph serve`: zoom,
pan, fit and full screen; states as fills, skipped branches dimmed and the edges taken highlighted; an
Agent's tools and sub-agents; a running component's elapsed time; a component opening its step; answers as
safe Markdown with their thinking; each turn's time and tokens; and the defects the first inspector had
(Sign out before signing in, a trace link to `sessions/null`, a finished form turn drawn paused, the
composer open while a form waits, Check passing a Categorize without a model)."""
from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from tests.server.helpers import REPO, Api, cpn
from tests.server.ui.test_inspector import CHAT_DSL, FORM_DSL, SLOW_DSL, at_new_agent, box, component, open_agent, send

# begin -> Categorize:Route: "yes" -> LLM:Md -> Message:Yes; "no" -> Message:No (never taken: the script says yes)
ROUTE_DSL = {"components": {
    "begin": cpn("Begin", {"prologue": "Ask me anything."}, ["Categorize:Route"]),
    "Categorize:Route": cpn("Categorize", {"llm_id": "gpt-4o@OpenAI", "category_description": {
        "yes": {"description": "a yes", "to": ["LLM:Md"]}, "no": {"description": "a no", "to": ["Message:No"]}}},
        ["LLM:Md", "Message:No"]),
    "LLM:Md": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                  ["Message:Yes"]),
    "Message:Yes": cpn("Message", {"content": ["{LLM:Md@content}"]}),
    "Message:No": cpn("Message", {"content": ["No."]}),
}}


# both categories lead to LLM:Md: only the edge of the category picked ("yes") is the one taken
SHARED_DSL = {"components": {
    **ROUTE_DSL["components"],
    "Categorize:Route": cpn("Categorize", {"llm_id": "gpt-4o@OpenAI", "category_description": {
        "yes": {"description": "a yes", "to": ["LLM:Md"]}, "no": {"description": "a no", "to": ["LLM:Md"]}}}, ["LLM:Md"]),
}}
del SHARED_DSL["components"]["Message:No"]


def template(name: str) -> dict:
    return json.loads((REPO / "canvas2graph" / "templates" / "ragflow" / f"{name}.json").read_text())["dsl"]


def viewport(b) -> str:
    return b.page.locator(".graph .react-flow__viewport").get_attribute("style") or ""


def test_the_canvas_zooms_pans_fits_and_goes_full_screen(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, CHAT_DSL, "Zoomable")
    start = viewport(b)
    b.page.get_by_role("button", name="Zoom In").click()
    expect(b.page.locator(".graph .react-flow__viewport")).not_to_have_attribute("style", start)
    zoomed = viewport(b)
    pane = b.page.locator(".graph .react-flow__pane").bounding_box()
    b.page.mouse.move(pane["x"] + pane["width"] - 30, pane["y"] + 20)       # an empty corner: the pane pans
    b.page.mouse.down()
    b.page.mouse.move(pane["x"] + pane["width"] - 130, pane["y"] + 60, steps=5)
    b.page.mouse.up()
    expect(b.page.locator(".graph .react-flow__viewport")).not_to_have_attribute("style", zoomed)
    b.page.get_by_role("button", name="Fit View").click()
    b.page.get_by_role("button", name="Full screen").click()
    canvas = b.page.locator(".graph.full-screen")
    expect(canvas).to_be_visible()
    area = canvas.bounding_box()
    assert area["width"] == 1280 and area["height"] == 800
    expect(box(b, "LLM:A")).to_be_in_viewport()
    b.shot("full-screen")
    b.page.keyboard.press("Escape")
    expect(b.page.locator(".graph.full-screen")).to_have_count(0)
    assert b.errors == []


def test_a_finished_turn_fills_its_states_dims_the_branch_not_taken_and_highlights_the_edges_taken(
        browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, ROUTE_DSL, "Routed")
    waiting = box(b, "LLM:Md").evaluate("e => getComputedStyle(e).backgroundColor")
    send(b, "Shall we plan?")
    expect(b.page.get_by_role("status").filter(has_text="Finished.")).to_be_visible()
    expect(component(b, "Message:No")).to_have_attribute("data-state", "skipped")
    assert float(box(b, "Message:No").evaluate("e => getComputedStyle(e).opacity")) < 0.5
    done = box(b, "LLM:Md").evaluate("e => getComputedStyle(e).backgroundColor")
    assert done != waiting and done != "rgb(255, 255, 255)"          # a fill, readable at any zoom
    taken = b.page.locator(".graph .react-flow__edge.taken")
    expect(b.page.locator('.graph .react-flow__edge[data-id="Categorize:Route[yes]->LLM:Md"]')).to_have_class(re.compile("taken"))
    expect(b.page.locator('.graph .react-flow__edge[data-id="Categorize:Route[no]->Message:No"]')).not_to_have_class(re.compile("taken"))
    expect(taken).to_have_count(3)                          # begin -> Categorize -> LLM -> Message
    # each category is a branch of its own on the box, its edge leaving from it
    expect(box(b, "Categorize:Route").locator(".node-route")).to_have_text(["yes", "no"])
    # the turn's time and tokens under its answer
    expect(b.page.locator(".message.assistant .turn-meta").last).to_have_text(re.compile(r"\d+ (ms|s) · \d+ in / \d+ out"))
    b.shot("routed")
    assert b.errors == []


def test_the_edges_stay_drawn_while_a_turn_changes_the_states(browsing, ui_server, alice_token):
    """Every event of a turn gives the canvas new states; React Flow keeps what it measured of the boxes, so
    no edge is taken off the page and drawn again (on a busy machine that used to take seconds)."""
    b = at_new_agent(browsing, ui_server, alice_token, ROUTE_DSL, "Steady edges")
    edges = b.page.locator(".graph .react-flow__edge")
    expect(edges).to_have_count(4)
    b.page.evaluate("""() => {
        window.__edgesRemoved = 0;
        new MutationObserver(records => {
            for (const r of records) for (const gone of r.removedNodes) {
                if (gone.nodeType === 1 && (gone.matches('.react-flow__edge') || gone.querySelector('.react-flow__edge'))) window.__edgesRemoved++;
            }
        }).observe(document.querySelector('.graph .react-flow__edges'), {childList: true, subtree: true});
    }""")
    send(b, "Shall we plan?")
    expect(component(b, "LLM:Md")).to_have_attribute("data-state", "running")
    assert edges.count() == 4
    expect(b.page.get_by_role("status").filter(has_text="Finished.")).to_be_visible()
    expect(b.page.locator(".graph .react-flow__edge.taken")).to_have_count(3)
    assert edges.count() == 4
    assert b.page.evaluate("window.__edgesRemoved") == 0
    assert b.errors == []


def test_of_two_categories_leading_to_one_component_only_the_one_picked_is_drawn_taken(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, SHARED_DSL, "Shared target")
    send(b, "Shall we plan?")
    expect(b.page.get_by_role("status").filter(has_text="Finished.")).to_be_visible()
    picked = b.page.locator('.graph .react-flow__edge[data-id="Categorize:Route[yes]->LLM:Md"]')
    other = b.page.locator('.graph .react-flow__edge[data-id="Categorize:Route[no]->LLM:Md"]')
    expect(picked).to_have_class(re.compile("taken"))
    expect(other).not_to_have_class(re.compile("taken"))
    b.shot("shared-target")
    b.page.reload()                                       # the reopened session draws the same from its trace
    expect(component(b, "LLM:Md")).to_have_attribute("data-state", "done")
    expect(picked).to_have_class(re.compile("taken"))
    expect(other).not_to_have_class(re.compile("taken"))
    assert b.errors == []


def test_answers_render_markdown_safely_with_their_thinking_also_when_reopened(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, ROUTE_DSL, "Markdown")
    send(b, "Give me a plan")
    answer = b.page.locator(".message.assistant").last
    expect(answer.locator("table td").filter(has_text="Ann")).to_have_count(1)
    expect(answer.locator("strong").filter(has_text="Ann")).to_have_count(1)
    expect(answer.locator("code").filter(has_text="make docs")).to_have_count(1)
    link = answer.get_by_role("link", name="the guide")
    expect(link).to_have_attribute("href", "https://example.com/guide")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    thinking = answer.locator("details.thinking")
    thinking.locator("summary").click()
    expect(thinking).to_contain_text("The user wants a plan.")
    b.shot("markdown")
    # reopened, the stored answer keeps its thinking apart: no raw <think> tags
    b.page.reload()
    answer = b.page.locator(".message.assistant").last
    expect(answer.locator("table")).to_have_count(1)
    expect(answer.locator("details.thinking")).to_have_count(1)
    assert "<think>" not in b.page.locator("main").inner_text()
    assert b.errors == []


def test_an_agents_tools_and_sub_agents_are_drawn_below_it(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, template("deep_research"), "Deep research")
    for sub in ("Agent:FreeDucksObey", "Agent:WeakBoatsServe", "Agent:SwiftToysTell"):
        expect(b.page.locator(f'.react-flow__node[data-id="{sub}"] .c2g-node.kind-agent')).to_have_count(1)
    tools = b.page.locator('.react-flow__node[data-id="Tool:FairToolsLive"] .c2g-node.kind-tool')
    expect(tools).to_have_count(1)
    expect(tools).not_to_have_text("")
    expect(b.page.locator('.graph .react-flow__edge[data-id="Agent:NewPumasLick->Agent:FreeDucksObey"]')).to_have_count(1)
    b.page.get_by_role("button", name="Fit View").click()
    b.shot("tools-and-sub-agents")
    assert b.errors == []


def test_a_running_component_counts_its_time_and_cancel_says_the_answer_had_finished(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, SLOW_DSL, "Slow view")
    send(b, "take your time")
    running = box(b, "LLM:Slow")
    expect(running).to_have_class(re.compile("state-running"))
    expect(running.locator(".elapsed-live")).to_have_text(re.compile(r"^\d+\.\d s$"))
    first = running.locator(".elapsed-live").inner_text()
    expect(running.locator(".elapsed-live")).not_to_have_text(first)          # it counts
    b.shot("running")
    b.page.get_by_role("button", name="Cancel").click()
    # a cancel stops the turn at once, mid-way through the streaming Message
    expect(b.page.locator(".message.notice-warning")).to_have_text(
        "The turn was cancelled before its answer finished.", timeout=30_000)
    expect(component(b, "LLM:Slow")).to_have_attribute("data-state", "cancelled")
    expect(component(b, "LLM:After")).not_to_have_attribute("data-state", "done")


def test_clicking_a_component_opens_its_step(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, CHAT_DSL, "Clickable")
    box(b, "LLM:A").click()
    drawer = b.page.get_by_role("dialog", name="Step of LLM:A")
    expect(drawer).to_contain_text("Run the agent first")
    b.page.keyboard.press("Escape")
    send(b, "open me")
    expect(b.page.get_by_role("status").filter(has_text="Finished.")).to_be_visible()
    box(b, "LLM:A").click()
    step = drawer.locator('details.step[data-component="LLM:A"]')
    expect(step).to_have_attribute("open", "")
    expect(step).to_contain_text("open me")
    expect(b.page).not_to_have_url(re.compile(r"/trace"))                 # the chat stays
    # by keyboard: the component list's names are buttons
    b.page.keyboard.press("Escape")
    b.page.get_by_role("button", name="Open the step of Message:M").focus()
    b.page.keyboard.press("Enter")
    expect(b.page.get_by_role("dialog", name="Step of Message:M").locator('details.step[data-component="Message:M"]')).to_have_attribute("open", "")
    # the trace page opens the step too
    b.page.get_by_role("link", name="Open the full trace").click()
    expect(b.page).to_have_url(re.compile(r"/trace/Message%3AM$"))
    expect(b.page.locator('details.step[data-component="Message:M"]')).to_have_attribute("open", "")
    assert b.errors == []


# --- the defects the first inspector had ---------------------------------------------------------------
def test_sign_out_shows_only_when_signed_in(browsing, alice_token):
    b = browsing()
    b.page.goto(b.server.url + "/")
    expect(b.page.get_by_label("API token")).to_be_visible()
    expect(b.page.get_by_role("button", name="Sign out")).to_have_count(0)
    b.sign_in(alice_token)
    expect(b.page.get_by_role("button", name="Sign out")).to_be_visible()


def test_a_new_session_has_no_trace_link_until_it_has_a_session(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, CHAT_DSL, "No null")
    expect(b.page.get_by_role("link", name="Trace of this session")).to_have_count(0)
    send(b, "now there is one")
    link = b.page.get_by_role("link", name="Trace of this session")
    expect(link).to_be_visible()
    assert "null" not in link.get_attribute("href") and "/sessions/" in link.get_attribute("href")


def test_a_waiting_form_holds_the_composer_and_keeps_focus_and_a_finished_form_turn_is_done(
        browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, FORM_DSL, "Form wait")
    composer = b.page.get_by_role("textbox", name="Your message")
    expect(composer).to_be_disabled()                        # Begin's form comes first
    expect(b.page.get_by_role("textbox", name="Topic")).to_be_focused()
    b.page.keyboard.type("tea")
    b.page.keyboard.press("Enter")
    form = b.page.locator("form.inputs-form").last
    expect(form.get_by_role("heading")).to_have_text("The agent asks")
    expect(composer).to_be_disabled()
    expect(b.page.get_by_role("button", name="Send", exact=True)).to_be_disabled()
    expect(form.get_by_role("textbox", name="Feedback")).to_be_focused()
    expect(b.page.locator("#composer-wait")).to_contain_text("waits for the form")
    b.shot("form-waits")
    form.get_by_role("textbox", name="Feedback").fill("fine")
    form.get_by_label("Tone").select_option("calm")
    form.get_by_role("spinbutton", name="How many").fill("1")
    form.get_by_role("button", name="Send answer").click()
    expect(b.page.get_by_role("status").filter(has_text="Finished.")).to_be_visible()
    expect(composer).to_be_enabled()
    expect(b.page.locator(".message.user").last).to_contain_text("Feedback: fine")     # labels, not keys
    # reopened, the finished turn's form component is done, not paused, and no form asks again
    b.page.reload()
    expect(component(b, "Message:Out")).to_have_attribute("data-state", "done")
    expect(component(b, "UserFillUp:Ask")).to_have_attribute("data-state", "done")
    expect(b.page.locator("form.inputs-form")).to_have_count(0)
    expect(b.page.get_by_role("textbox", name="Your message")).to_be_enabled()
    assert b.errors == []


def test_check_names_a_categorize_without_a_model(browsing, alice_token):
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_label("Start from a template").select_option(label="Customer feedback disptacher")
    b.page.get_by_role("button", name="Check").click()
    row = b.page.locator('table.diagnostics tr[data-field="params.llm_id"]').first
    expect(row).to_contain_text("Categorize:")
    expect(row).to_contain_text("llm_id is empty")
    expect(b.page.locator(".check-result .error").first).to_contain_text("before saving")


def test_a_json_error_is_shown_with_its_line_and_column(browsing, alice_token):
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_label("Title").fill("Typo")
    b.page.get_by_label("DSL (JSON)").fill('{\n  "components": {\n    "begin": }\n}')
    b.page.get_by_role("button", name="Check").click()
    expect(b.page.locator(".check-result .error")).to_have_text("Not valid JSON at line 3, column 14: Expecting value.")


def test_the_run_view_reads_at_400_pixels(browsing, ui_server, alice_token):
    Api(ui_server, alice_token).agent(ROUTE_DSL, "Narrow view")
    b = browsing(width=400)
    b.sign_in(alice_token)
    open_agent(b, "Narrow view")
    send(b, "narrow")
    expect(b.page.get_by_role("status").filter(has_text="Finished.")).to_be_visible()
    assert b.page.evaluate("document.documentElement.scrollWidth") <= 400
    canvas = b.page.locator(".graph .canvas").bounding_box()
    assert canvas["width"] <= 400 and canvas["height"] >= 300
    b.shot("narrow-run")
    assert b.errors == []
