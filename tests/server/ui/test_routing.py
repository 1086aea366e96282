"""Routing a Categorize's categories and a Switch's cases on the canvas, as RAGFlow's canvas does: each branch
is a handle of its own on the box (a category, "Case 1"..., the Switch's "Else"); dragging from it to a box
routes that branch there, saved into the DSL as RAGFlow saves it (a category's `to`, a case's `to`, the
Switch's `end_cpn_ids`, `downstream`, and a `graph` edge whose `sourceHandle` is the branch's handle: the
category's uuid in the node's `items`, "Case 1", "end_cpn_ids"), and drawn back from the same handle when
the agent opens again. In Debian's Chromium against a real `canvas2graph serve`."""
from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from tests.server.helpers import REPO, Api, cpn
from tests.server.ui.test_editor import node, press, save_version
from tests.server.ui.test_inspector import send

# begin -> Switch:S: case 1 (the question contains "a") and else, both unrouted; three Messages to route to
SWITCH_DSL = {"components": {
    "begin": cpn("Begin", {"prologue": "Hi."}, ["Switch:S"]),
    "Switch:S": cpn("Switch", {"conditions": [{"logical_operator": "and", "items": [
        {"cpn_id": "sys.query", "operator": "contains", "value": "a"}], "to": []}], "end_cpn_ids": []}),
    "Message:A": cpn("Message", {"content": ["Case one."]}),
    "Message:B": cpn("Message", {"content": ["Otherwise."]}),
}}


def handle(b, cid: str, handle_id: str):
    return b.page.locator(f'.editor-canvas .react-flow__node[data-id="{cid}"] .react-flow__handle[data-handleid="{handle_id}"]')


def drag(b, source, target) -> None:
    """Mouse down on `source`, moved in steps, up on `target`: React Flow's connection gesture."""
    start, end = source.bounding_box(), target.bounding_box()
    b.page.mouse.move(start["x"] + start["width"] / 2, start["y"] + start["height"] / 2)
    b.page.mouse.down()
    b.page.mouse.move(end["x"] + end["width"] / 2, end["y"] + end["height"] / 2, steps=12)
    b.page.mouse.up()


def target_handle(b, cid: str):
    return b.page.locator(f'.editor-canvas .react-flow__node[data-id="{cid}"] .react-flow__handle.target')


def edge_leaves_from(b, edge_id: str, source_handle) -> None:
    """The drawn edge starts at that handle (within a few pixels on the screen)."""
    expect(b.page.locator(f'.react-flow__edge[data-id="{edge_id}"]')).to_have_count(1)
    start = b.page.locator(f'.react-flow__edge[data-id="{edge_id}"] path.react-flow__edge-path').evaluate(
        """p => { const m = p.getScreenCTM(), q = p.getPointAtLength(0); return {x: q.x * m.a + m.e, y: q.y * m.d + m.f}; }""")
    box = source_handle.bounding_box()
    centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    assert abs(start["x"] - centre[0]) < 8 and abs(start["y"] - centre[1]) < 8, (edge_id, start, centre)


def open_editor(browsing, token: str, agent_id: str):
    b = browsing()
    b.sign_in(token)
    b.page.goto(f"{b.server.url}/#/agents/{agent_id}/edit")
    expect(node(b, "begin")).to_be_visible()
    return b


def test_a_switch_case_and_its_else_are_routed_by_dragging_from_their_own_handles(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(SWITCH_DSL, "Switched")
    b = open_editor(browsing, alice_token, agent_id)
    # one handle per case and one for the else, each labelled on the box; nothing routed yet: two errors
    expect(node(b, "Switch:S").locator(".node-route")).to_have_text(["Case 1", "Else"])
    expect(b.page.locator(".check-state")).to_have_text("2 errors")
    drag(b, handle(b, "Switch:S", "Case 1"), target_handle(b, "Message:A"))
    expect(b.page.locator("#notice")).to_contain_text("Routed Case 1 of Switch:S to Message:A")
    drag(b, handle(b, "Switch:S", "end_cpn_ids"), target_handle(b, "Message:B"))
    expect(b.page.locator(".check-state")).to_have_text("Compiles")
    edge_leaves_from(b, "Switch:S[Case 1]->Message:A", handle(b, "Switch:S", "Case 1"))
    edge_leaves_from(b, "Switch:S[Else]->Message:B", handle(b, "Switch:S", "end_cpn_ids"))
    b.shot("switch-routed")
    save_version(b)
    dsl = alice.ok("GET", f"/agents/{agent_id}")["dsl"]
    switch = dsl["components"]["Switch:S"]
    # as RAGFlow saves it: the case's `to`, the else's `end_cpn_ids`, downstream, and edges from the handles
    assert switch["obj"]["params"]["conditions"][0]["to"] == ["Message:A"]
    assert switch["obj"]["params"]["end_cpn_ids"] == ["Message:B"]
    assert switch["downstream"] == ["Message:A", "Message:B"]
    assert dsl["components"]["Message:A"]["upstream"] == ["Switch:S"]
    edges = {(e["source"], e["sourceHandle"], e["target"]) for e in dsl["graph"]["edges"] if e["source"] == "Switch:S"}
    assert edges == {("Switch:S", "Case 1", "Message:A"), ("Switch:S", "end_cpn_ids", "Message:B")}
    form = next(n for n in dsl["graph"]["nodes"] if n["id"] == "Switch:S")["data"]["form"]
    assert form["conditions"][0]["to"] == ["Message:A"] and form["end_cpn_ids"] == ["Message:B"]
    # opened again, each edge leaves from its branch's handle
    b.page.reload()
    expect(node(b, "Switch:S")).to_be_visible()
    edge_leaves_from(b, "Switch:S[Case 1]->Message:A", handle(b, "Switch:S", "Case 1"))
    edge_leaves_from(b, "Switch:S[Else]->Message:B", handle(b, "Switch:S", "end_cpn_ids"))
    # a box deleted leaves every branch that named it (the else has no target again: an error), undone
    node(b, "Message:B").click()
    b.page.keyboard.press("Delete")
    expect(b.page.locator('.react-flow__edge[data-id="Switch:S[Else]->Message:B"]')).to_have_count(0)
    expect(b.page.locator(".check-state")).to_have_text("1 error")
    expect(b.page.locator(".diagnostics-box")).to_contain_text("end_cpn_ids")
    press(b, "Undo")
    expect(b.page.locator(".check-state")).to_have_text("Compiles")
    # and it runs the way it was drawn
    b.page.get_by_role("link", name="Run").click()
    send(b, "a question")
    expect(b.page.locator(".message.assistant").last).to_contain_text("Case one.")
    assert b.errors == []


def test_a_categorize_category_is_routed_from_its_handle_named_by_the_uuid_ragflow_gave_it(browsing, ui_server, alice_token):
    """RAGFlow's customer feedback template: its categories' handles are the uuids in the node's `items`."""
    dsl = json.loads((REPO / "canvas2graph" / "templates" / "ragflow" / "customer_feedback_dispatcher.json").read_text())["dsl"]
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(dsl, "Feedback routes")
    b = open_editor(browsing, alice_token, agent_id)
    router = "Categorize:RottenWallsObey"
    items = {i["name"]: i["uuid"] for n in dsl["graph"]["nodes"] if n["id"] == router for i in n["data"]["form"]["items"]}
    positive = items["Positive review"]
    expect(node(b, router).locator(".node-route")).to_have_text(["Positive review", "Negative review"])       # the items' order
    edge_leaves_from(b, f"{router}[Positive review]->Message:SevenPlanetsPeel", handle(b, router, positive))
    # route "Positive review" to the aggregator too: dragged from that category's handle
    drag(b, handle(b, router, positive), target_handle(b, "VariableAggregator:FlatBerriesRest"))
    expect(b.page.locator("#notice")).to_contain_text(f"Routed Positive review of {router} to VariableAggregator:FlatBerriesRest")
    edge_leaves_from(b, f"{router}[Positive review]->VariableAggregator:FlatBerriesRest", handle(b, router, positive))
    b.shot("categorize-routed")
    save_version(b)
    saved = alice.ok("GET", f"/agents/{agent_id}")["dsl"]
    params = saved["components"][router]["obj"]["params"]
    assert params["category_description"]["Positive review"]["to"] == ["Message:SevenPlanetsPeel", "VariableAggregator:FlatBerriesRest"]
    assert params["category_description"]["Negative review "] == dsl["components"][router]["obj"]["params"]["category_description"]["Negative review "]
    assert "VariableAggregator:FlatBerriesRest" in saved["components"][router]["downstream"]
    new = [e for e in saved["graph"]["edges"] if e not in dsl["graph"]["edges"]]
    assert new == [{"id": f"xy-edge__{router}{positive}-VariableAggregator:FlatBerriesRestend", "source": router,
                    "sourceHandle": positive, "target": "VariableAggregator:FlatBerriesRest", "targetHandle": "end",
                    "data": {"isHovered": False}}]
    assert all(e in saved["graph"]["edges"] for e in dsl["graph"]["edges"])        # RAGFlow's own edges stay as they were
    # the node's items (RAGFlow's categories, the handles' ids) are unchanged
    before = next(n for n in dsl["graph"]["nodes"] if n["id"] == router)
    after = next(n for n in saved["graph"]["nodes"] if n["id"] == router)
    assert after["data"]["form"]["items"] == before["data"]["form"]["items"]
    # deleting that edge (focused and selected from the keyboard) takes the target out of the category again
    b.page.locator(f'.react-flow__edge[data-id="{router}[Positive review]->VariableAggregator:FlatBerriesRest"]').focus()
    b.page.keyboard.press("Enter")
    b.page.keyboard.press("Delete")
    expect(b.page.locator(f'.react-flow__edge[data-id="{router}[Positive review]->VariableAggregator:FlatBerriesRest"]')).to_have_count(0)
    save_version(b)
    again = alice.ok("GET", f"/agents/{agent_id}")["dsl"]
    assert again["components"][router]["obj"]["params"]["category_description"]["Positive review"]["to"] == ["Message:SevenPlanetsPeel"]
    assert again["graph"]["edges"] == dsl["graph"]["edges"]
    assert b.errors == []


def test_a_new_categorize_gets_ragflow_items_and_its_categories_are_routed_from_the_keyboard(browsing, ui_server, alice_token):
    """A Categorize made here gets the `items` RAGFlow's canvas keeps (a uuid per category); the connect form
    routes a branch without a mouse."""
    b = browsing()
    b.sign_in(alice_token)
    b.page.goto(b.server.url + "/#/new")
    expect(node(b, "begin")).to_be_visible()
    b.page.get_by_label("Title").fill("Keyboard routes")
    b.page.get_by_label("Component", exact=True).select_option("Message")
    press(b, "Add component")
    b.page.get_by_role("textbox", name="Reply 1").click()
    b.page.keyboard.type("Thanks!")
    b.page.get_by_role("button", name="Close").click()
    b.page.get_by_label("Component", exact=True).select_option("Categorize")
    press(b, "Add component")
    b.page.get_by_label("llm_id").fill("gpt-4o@OpenAI")
    categories = b.page.locator('[data-field="params.category_description"]')
    for i, (name, description) in enumerate((("thanks", "a thank-you"), ("other", "anything else"))):
        categories.get_by_role("button", name="Add a category").click()
        row = categories.locator(".category-row").nth(i)
        row.get_by_label("Name").fill(name)
        row.get_by_label("Description").fill(description)
    expect(node(b, "Categorize:1").locator(".node-route")).to_have_text(["thanks", "other"])
    for source, branch, target in (("begin", None, "Categorize:1"), ("Categorize:1", "thanks", "Message:1"), ("Categorize:1", "other", "Message:1")):
        b.page.get_by_label("Connect", exact=True).select_option(source)
        if branch:
            b.page.get_by_label("branch", exact=True).select_option(label=branch)
        b.page.get_by_label("to", exact=True).select_option(target)
        press(b, "Connect")
    expect(b.page.locator(".check-state")).to_have_text("Compiles")
    press(b, "Save agent")
    expect(b.page.get_by_role("heading", level=1, name="Keyboard routes")).to_be_visible()
    agent_id = b.page.url.split("#/agents/")[1].split("/")[0]
    dsl = Api(ui_server, alice_token).ok("GET", f"/agents/{agent_id}")["dsl"]
    params = dsl["components"]["Categorize:1"]["obj"]["params"]
    assert params["category_description"]["thanks"]["to"] == ["Message:1"] and params["category_description"]["other"]["to"] == ["Message:1"]
    items = next(n for n in dsl["graph"]["nodes"] if n["id"] == "Categorize:1")["data"]["form"]["items"]
    assert [i["name"] for i in items] == ["thanks", "other"]
    assert all(re.fullmatch(r"[0-9a-f-]{36}", i["uuid"]) for i in items)
    assert sorted(e["sourceHandle"] for e in dsl["graph"]["edges"] if e["source"] == "Categorize:1") == sorted(i["uuid"] for i in items)
    # the run view draws both edges from their own handles
    expect(b.page.locator('.graph .react-flow__edge[data-id="Categorize:1[thanks]->Message:1"]')).to_have_count(1)
    expect(b.page.locator('.graph .react-flow__edge[data-id="Categorize:1[other]->Message:1"]')).to_have_count(1)
    expect(b.page.locator('.graph .react-flow__node[data-id="Categorize:1"] .node-route')).to_have_text(["thanks", "other"])
    b.shot("keyboard-routes")
    assert b.errors == []
