"""An agent built from a blank canvas the way a person builds one in RAGFlow's canvas, in Debian's Chromium against a
real `canvas2graph serve`: eight components of five kinds (Begin, a Categorize with three routes, three LLMs, a
Switch, two Messages) added from the palette, connected, their categories, cases, models and replies set in forms,
references inserted from the picker; saved, run, and edited again. No JSON and no reference is typed by hand."""
from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.server.helpers import Api
from tests.server.ui.test_canvas_editing import add_by_palette
from tests.server.ui.test_editor import fresh_editor, node, press, save_version
from tests.server.ui.test_inspector import send
from tests.server.ui.test_params_editors import pick

MODEL = "gpt-4o@OpenAI"


def connect(b, source: str, target: str) -> None:
    """The keyboard's way to draw an edge: "Connect <source> to <target>"."""
    b.page.get_by_label("Connect", exact=True).select_option(source)
    b.page.get_by_label("to", exact=True).select_option(target)
    b.page.get_by_role("button", name="Connect", exact=True).click()


def insert_reference(b, box, search: str, option: str) -> None:
    """Open the picker with `/` at the end of `box`, narrow it by `search`, and choose `option`."""
    box.click()
    b.page.keyboard.press("Control+End")
    b.page.keyboard.type(" /")
    picker = b.page.get_by_role("listbox", name="References in scope")
    expect(picker).to_be_visible()
    b.page.keyboard.type(search)
    picker.get_by_role("option", name=option, exact=True).click()
    expect(picker).to_have_count(0)


def test_an_eight_component_router_is_built_from_blank_saved_run_and_edited_again_without_json_or_typed_references(
        browsing, ui_server, alice_token):
    b = fresh_editor(browsing, alice_token, width=1440)
    b.page.get_by_label("Title").fill("Built from blank")
    for kind in ("Categorize", "LLM", "LLM", "LLM", "Switch", "Message", "Message"):
        add_by_palette(b, kind)
    b.page.get_by_label("Search components").fill("")
    for cid in ("Categorize:1", "LLM:1", "LLM:2", "LLM:3", "Switch:1", "Message:1", "Message:2"):
        expect(node(b, cid)).to_be_visible()

    connect(b, "begin", "Categorize:1")
    # the Categorize: its model picked, three categories as rows, each routed to an LLM chosen from a list
    form = pick(b, "Categorize:1")
    form.get_by_label("llm_id").fill(MODEL)
    cats = form.locator('[data-field="params.category_description"]')
    for i, (name, target) in enumerate([("billing", "LLM:1"), ("legal", "LLM:2"), ("other", "LLM:3")]):
        cats.get_by_role("button", name="Add a category").click()
        row = cats.locator(".category-row").nth(i)
        row.get_by_label("Name").fill(name)
        row.get_by_label("Description").fill(f"Questions about {name}")
        row.get_by_label(f"Category {name} goes to").select_option(target)
    expect(node(b, "Categorize:1").locator(".node-route")).to_have_text(["billing", "legal", "other"])

    # the LLMs start from RAGFlow's values and their one {sys.query} message; each gets its model
    for cid in ("LLM:1", "LLM:2", "LLM:3"):
        form = pick(b, cid)
        form.get_by_label("llm_id").fill(MODEL)
        expect(form.locator('[data-field="params.prompts"] .ref-chip[data-ref="sys.query"]')).to_have_count(1)
    connect(b, "LLM:1", "Switch:1")
    connect(b, "LLM:2", "Message:2")
    connect(b, "LLM:3", "Message:2")

    # the Switch: one case built from a reference picked from what is upstream, an operator and a value
    form = pick(b, "Switch:1")
    form.get_by_role("button", name="Add a case").click()
    form.get_by_label("Case 1, condition 1: reference").select_option("LLM:1@content")
    form.get_by_label("Case 1, condition 1: operator").select_option("contains")
    form.get_by_label("Case 1, condition 1: value").fill("refund")
    form.get_by_label("Case 1 goes to").select_option("Message:1")
    form.get_by_label("Else goes to", exact=True).select_option("Message:2")
    expect(node(b, "Switch:1").locator(".node-route")).to_have_text(["Case 1", "Else"])

    # the Messages' replies: words typed, references chosen from the picker
    reply = pick(b, "Message:1").get_by_role("textbox", name="Reply 1")
    reply.click()
    b.page.keyboard.type("Refunds:")
    insert_reference(b, reply, "LLM_0", "LLM_0 › content, string")      # boxes read by their RAGFlow names
    reply = pick(b, "Message:2").get_by_role("textbox", name="Reply 1")
    reply.click()
    b.page.keyboard.type("You asked")
    insert_reference(b, reply, "query", "sys.query, string")
    expect(reply.locator(".ref-chip")).to_have_text(["sys.query"])
    expect(b.page.locator(".check-state")).to_have_text("Compiles")
    expect(b.page.locator(".editor-canvas textarea[placeholder=JSON]")).to_have_count(0)
    b.shot("built-from-blank", full_page=False)
    press(b, "Save agent")
    expect(b.page.get_by_role("heading", level=1, name="Built from blank")).to_be_visible()
    agent_id = b.page.url.split("#/agents/")[1].split("/")[0]

    # saved as RAGFlow saves it: eight components of five kinds, routes in params, references braced
    dsl = Api(ui_server, alice_token).ok("GET", f"/agents/{agent_id}")["dsl"]
    comps = dsl["components"]
    assert len(comps) == 8
    assert sorted({c["obj"]["component_name"] for c in comps.values()}) == ["Begin", "Categorize", "LLM", "Message", "Switch"]
    cats_saved = comps["Categorize:1"]["obj"]["params"]["category_description"]
    assert {name: c["to"] for name, c in cats_saved.items()} == {"billing": ["LLM:1"], "legal": ["LLM:2"], "other": ["LLM:3"]}
    switch = comps["Switch:1"]["obj"]["params"]
    assert switch["conditions"] == [{"logical_operator": "and", "to": ["Message:1"],
                                     "items": [{"cpn_id": "LLM:1@content", "operator": "contains", "value": "refund"}]}]
    assert switch["end_cpn_ids"] == ["Message:2"]
    assert comps["Message:1"]["obj"]["params"]["content"] == ["Refunds: {LLM:1@content}"]
    assert comps["Message:2"]["obj"]["params"]["content"] == ["You asked {sys.query}"]
    assert comps["LLM:1"]["obj"]["params"]["prompts"] == [{"role": "user", "content": "{sys.query}"}]

    # run: the scripted model answers, a route is taken, a Message answers in the chat
    b.page.goto(f"{b.server.url}/#/agents/{agent_id}")
    send(b, "Where is my refund?")
    answer = b.page.locator(".message.assistant").last
    expect(answer).to_contain_text(re.compile(r"Refunds:|You asked"), timeout=30_000)
    expect(b.page.locator('.states li[data-component="Categorize:1"]')).to_have_attribute("data-state", "done")

    # edited again: a fourth category, routed to a Message, saved as a new version
    b.page.goto(f"{b.server.url}/#/agents/{agent_id}/edit")
    expect(node(b, "Categorize:1")).to_be_visible()
    form = pick(b, "Categorize:1")
    cats = form.locator('[data-field="params.category_description"]')
    cats.get_by_role("button", name="Add a category").click()
    row = cats.locator(".category-row").nth(3)
    row.get_by_label("Name").fill("thanks")
    row.get_by_label("Category thanks goes to").select_option("Message:2")
    expect(node(b, "Categorize:1").locator(".node-route")).to_have_text(["billing", "legal", "other", "thanks"])
    # renamed as RAGFlow renames a box: the name it shows changes, its id (which references use) stays
    b.page.get_by_label("Name on the canvas").fill("Triage")
    expect(node(b, "Categorize:1").locator(".node-name")).to_have_text("Triage")
    save_version(b)
    dsl = Api(ui_server, alice_token).ok("GET", f"/agents/{agent_id}")["dsl"]
    assert dsl["components"]["Categorize:1"]["obj"]["params"]["category_description"]["thanks"]["to"] == ["Message:2"]
    assert len(Api(ui_server, alice_token).ok("GET", f"/agents/{agent_id}/versions")) == 2
    assert next(n for n in dsl["graph"]["nodes"] if n["id"] == "Categorize:1")["data"]["name"] == "Triage"
    assert b.errors == []
