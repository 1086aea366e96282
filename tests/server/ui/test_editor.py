"""The canvas editor in Debian's Chromium against a real `canvas2graph serve`: building an agent from Begin
alone (add, connect, params from the params model, live diagnostics on boxes and fields, save, run), moving
with undo and redo, deleting, saving a new version, Iteration bodies as groups, an Agent's tools, the
round trip of every RAGFlow template's `graph`, by keyboard and at 400 pixels."""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.server.helpers import REPO, Api
from tests.server.ui.test_inspector import CHAT_DSL, send

RAGFLOW_TEMPLATES = sorted((REPO / "canvas2graph" / "templates" / "ragflow").glob("*.json"))


def node(b, cid: str):
    return b.page.locator(f'.editor-canvas .react-flow__node[data-id="{cid}"]')


def press(b, name: str) -> None:
    """A button pressed from the keyboard."""
    b.page.get_by_role("button", name=name, exact=True).focus()
    b.page.keyboard.press("Enter")


def drag(b, box, dy: int, grip: tuple[int, int] = (30, 15)) -> None:
    """Drag a box `dy` pixels down by the mouse, and wait until the editor has checked the moved DSL
    (its `POST /graphs/compile`, 350 ms after the last change). Only then does the page take the next key:
    React Flow's drag (d3-drag) swallows every click until a zero-delay timer after the mouse is released,
    and on a busy machine a keyboard press can come first (CI lost a Save pressed at once, 1 run in 5)."""
    start = box.bounding_box()
    x, y = start["x"] + grip[0], start["y"] + grip[1]
    with b.page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/graphs/compile")):
        b.page.mouse.move(x, y)
        b.page.mouse.down()
        b.page.mouse.move(x, y + dy, steps=8)
        b.page.mouse.up()


def save_version(b) -> None:
    """Press "Save as a new version" and wait for the API's reply to that save (the notice of an earlier
    save may still be on the page)."""
    with b.page.expect_response(lambda r: r.request.method == "PUT" and "/api/v1/agents/" in r.url) as reply:
        press(b, "Save as a new version")
    assert reply.value.ok
    expect(b.page.locator("#notice")).to_contain_text("Saved a new version")
    # the keyboard's place survives the save: the button is only aria-disabled while it runs
    expect(b.page.get_by_role("button", name="Save as a new version", exact=True)).to_be_focused()


def fresh_editor(browsing, token: str, width: int = 1280):
    b = browsing(width=width)
    b.sign_in(token)
    b.page.goto(b.server.url + "/#/new")
    expect(node(b, "begin")).to_be_visible()
    return b


def test_an_agent_built_on_the_canvas_by_keyboard_checks_live_saves_and_runs(browsing, ui_server, alice_token):
    b = fresh_editor(browsing, alice_token)
    b.page.get_by_label("Title").fill("Built here")
    # add an LLM: it is selected, its params form comes from its params model, and its empty model is an
    # error on the box and on the field
    b.page.get_by_label("Component", exact=True).select_option("LLM")
    press(b, "Add component")
    expect(node(b, "LLM:1")).to_be_visible()
    expect(b.page.get_by_role("heading", name="LLM:1")).to_be_visible()
    expect(node(b, "LLM:1").locator(".c2g-node")).to_have_class(__import__("re").compile("has-error"))
    model = b.page.get_by_label("llm_id")
    expect(model).to_have_attribute("aria-invalid", "true")
    expect(b.page.locator('.param-field[data-field="params.llm_id"] .field-problems')).to_contain_text("llm_id is empty")
    b.shot("diagnostics-live")
    model.fill("gpt-4o@OpenAI")
    expect(b.page.locator('.param-field[data-field="params.llm_id"] .field-problems')).to_have_count(0)
    # a new LLM asks about the user's question, as RAGFlow's does: one user message holding {sys.query}
    expect(b.page.get_by_role("textbox", name="Content of message 1").locator('.ref-chip[data-ref="sys.query"]')).to_have_count(1)
    # a Message that shows the LLM's answer
    b.page.get_by_role("button", name="Close").click()
    b.page.get_by_label("Component", exact=True).select_option("Message")
    press(b, "Add component")
    reply = b.page.get_by_role("textbox", name="Reply 1")
    reply.click()
    b.page.keyboard.type("Built: {LLM:1@content}")          # a reference typed in full becomes a chip too
    expect(reply.locator('.ref-chip[data-ref="LLM:1@content"]')).to_have_count(1)
    # connect begin -> LLM:1 -> Message:1 with the connect form
    for source, target in (("begin", "LLM:1"), ("LLM:1", "Message:1")):
        b.page.get_by_label("Connect", exact=True).select_option(source)
        b.page.get_by_label("to", exact=True).select_option(target)
        press(b, "Connect")
    expect(b.page.locator('.editor-canvas .react-flow__edge[data-id="LLM:1->Message:1"]')).to_have_count(1)
    expect(b.page.locator(".check-state")).to_have_text("Compiles")
    b.shot("built")
    press(b, "Save agent")
    # the new agent opens, and runs what was drawn
    expect(b.page.get_by_role("heading", level=1, name="Built here")).to_be_visible()
    send(b, "hello")
    expect(b.page.locator(".message.assistant").last).to_contain_text("Built:Answer 1 from LLM:1.")
    agent_id = b.page.url.split("#/agents/")[1].split("/")[0]
    dsl = Api(ui_server, alice_token).ok("GET", f"/agents/{agent_id}")["dsl"]
    assert dsl["components"]["begin"]["downstream"] == ["LLM:1"]
    graph_ids = {n["id"]: n for n in dsl["graph"]["nodes"]}
    assert set(graph_ids) == {"begin", "LLM:1", "Message:1"}
    assert graph_ids["LLM:1"]["type"] == "ragNode" and graph_ids["LLM:1"]["data"]["form"]["llm_id"] == "gpt-4o@OpenAI"
    assert {(e["source"], e["target"]) for e in dsl["graph"]["edges"]} == {("begin", "LLM:1"), ("LLM:1", "Message:1")}
    assert b.errors == []


def test_moving_undo_redo_delete_and_save_a_new_version(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(CHAT_DSL, "Movable")
    versions = len(alice.ok("GET", f"/agents/{agent_id}/versions"))
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_role("link", name="Edit Movable on the canvas").click()
    llm = node(b, "LLM:A")
    expect(llm).to_be_visible()
    before = llm.bounding_box()
    drag(b, llm, 120, grip=(60, 20))
    moved = llm.bounding_box()
    assert moved["y"] > before["y"] + 60
    press(b, "Undo")
    expect(llm).to_have_attribute("style", __import__("re").compile("."))
    assert abs(llm.bounding_box()["y"] - before["y"]) < 2
    press(b, "Redo")
    assert abs(llm.bounding_box()["y"] - moved["y"]) < 2
    # by keyboard: a focused, selected box moves with the arrow keys
    llm.focus()
    b.page.keyboard.press("Enter")
    for _ in range(4):
        b.page.keyboard.press("ArrowRight")
    expect(b.page.get_by_role("heading", name="LLM:A")).to_be_visible()
    assert llm.bounding_box()["x"] > moved["x"] + 5
    press(b, "Undo")
    # delete Message:M with the Delete key: the box and its edge go
    node(b, "Message:M").click()
    b.page.keyboard.press("Delete")
    expect(node(b, "Message:M")).to_have_count(0)
    expect(b.page.locator('.editor-canvas .react-flow__edge[data-id="LLM:A->Message:M"]')).to_have_count(0)
    press(b, "Undo")
    expect(node(b, "Message:M")).to_have_count(1)
    # an edge, focused and selected from the keyboard, goes with Delete (and its link in the DSL)
    edge = b.page.locator('.editor-canvas .react-flow__edge[data-id="LLM:A->Message:M"]')
    edge.focus()
    b.page.keyboard.press("Enter")
    b.page.keyboard.press("Delete")
    expect(edge).to_have_count(0)
    expect(b.page.get_by_role("button", name="Disconnect Message:M")).to_have_count(0)
    press(b, "Undo")
    expect(edge).to_have_count(1)
    press(b, "Save as a new version")
    expect(b.page.locator("#notice")).to_contain_text("Saved a new version")
    assert len(alice.ok("GET", f"/agents/{agent_id}/versions")) == versions + 1
    dsl = alice.ok("GET", f"/agents/{agent_id}")["dsl"]
    assert set(dsl["components"]) == set(CHAT_DSL["components"])
    positions = {n["id"]: n["position"] for n in dsl["graph"]["nodes"]}
    assert set(positions) == set(CHAT_DSL["components"])         # every component got a position
    assert b.errors == []


def test_an_iteration_body_is_a_group_and_an_agents_tools_have_their_own_forms(browsing, ui_server, alice_token):
    b = fresh_editor(browsing, alice_token)
    b.page.get_by_label("Component", exact=True).select_option("Iteration")
    press(b, "Add component")
    group = node(b, "Iteration:1")
    expect(node(b, "IterationItem:1")).to_be_visible()
    # with the Iteration selected, a new component goes inside it
    b.page.get_by_label("Component", exact=True).select_option("StringTransform")
    press(b, "Add component")
    # drawn inside the group once the view settles (it scrolls to the new box)
    b.page.wait_for_function("""() => {
        const box = id => document.querySelector(`.editor-canvas .react-flow__node[data-id="${id}"]`).getBoundingClientRect();
        const i = box('StringTransform:1'), o = box('Iteration:1');
        return o.left <= i.left && i.right <= o.right + 1 && o.top <= i.top && i.bottom <= o.bottom + 1;
    }""", timeout=5000)
    b.page.get_by_role("button", name="Close").click()
    # a Loop is a group too, with its start item inside
    b.page.get_by_label("Component", exact=True).select_option("Loop")
    press(b, "Add component")
    expect(node(b, "LoopItem:1")).to_be_visible()
    b.page.wait_for_function("""() => {
        const box = id => document.querySelector(`.editor-canvas .react-flow__node[data-id="${id}"]`).getBoundingClientRect();
        const i = box('LoopItem:1'), o = box('Loop:1');
        return o.left <= i.left && i.right <= o.right + 1 && o.top <= i.top && i.bottom <= o.bottom + 1;
    }""", timeout=5000)
    b.page.get_by_role("button", name="Close").click()
    # an Agent with a tool: the tool's own params form, and the tool drawn below the Agent
    b.page.get_by_label("Component", exact=True).select_option("Agent")
    press(b, "Add component")
    tools = b.page.locator("fieldset.tools-field")
    tools.get_by_label("Tool", exact=True).select_option("TavilySearch")
    press(b, "Add tool")
    entry = tools.locator("details.tool-entry")
    expect(entry).to_have_count(1)
    expect(entry.get_by_label("api_key")).to_be_visible()
    expect(b.page.locator('.editor-canvas .react-flow__node[data-id="Agent:1::tools"]')).to_contain_text("TavilySearch")
    b.shot("groups-and-tools")
    assert b.errors == []


def test_an_agents_mcp_servers_are_a_form_whose_mistakes_name_their_field(browsing, ui_server, alice_token):
    """Servers and their tools are added, filled in and removed in fields of their own; what would not
    compile is said under the field, naming it as a diagnostic would (`params.mcp.0.mcp_id`)."""
    b = fresh_editor(browsing, alice_token)
    b.page.get_by_label("Title").fill("With MCP")
    b.page.get_by_label("Component", exact=True).select_option("Agent")
    press(b, "Add component")
    b.page.get_by_label("llm_id").fill("gpt-4o@OpenAI")
    mcp = b.page.locator("fieldset.mcp-field")
    press(b, "Add MCP server")
    server_id = mcp.get_by_label("Server id (mcp_id) of server 1")
    expect(server_id).to_have_attribute("aria-invalid", "true")
    expect(mcp.locator('[data-field="params.mcp.0.mcp_id"] .field-problems')).to_have_text(
        "params.mcp.0.mcp_id: name the MCP server (its id in the MCP config)")
    server_id.fill("calc")
    expect(mcp.locator('[data-field="params.mcp.0.mcp_id"] .field-problems')).to_have_count(0)
    # a tool needs a name, and one the server does not list yet
    press(b, "Add tool to server 1")
    expect(mcp.locator(".field-error")).to_have_text("params.mcp.0.tools: name the tool to add (its name on the server)")
    mcp.get_by_label("New tool").fill("add")
    press(b, "Add tool to server 1")
    tool = mcp.locator("fieldset.mcp-tool")
    expect(tool).to_have_count(1)
    tool.get_by_label("Description").fill("Adds two numbers.")
    schema = tool.get_by_label("Input schema (JSON)")
    schema.fill('{"type": "object",\n "properties": {"a": 1,}}')
    expect(tool.locator(".field-error")).to_have_text("params.mcp.0.tools.add.inputSchema: Not valid JSON at line 2, column 24.")
    schema.fill("[1, 2]")
    expect(tool.locator('[data-field="params.mcp.0.tools.add.inputSchema"] .field-problems')).to_have_text(
        "params.mcp.0.tools.add.inputSchema: must be a JSON schema object")
    tool.scroll_into_view_if_needed()
    b.shot("mcp-mistakes", full_page=False)
    schema.fill('{"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}')
    expect(tool.locator(".field-problems")).to_have_count(0)
    mcp.get_by_label("New tool").fill("add")
    press(b, "Add tool to server 1")
    expect(mcp.locator(".field-error")).to_have_text("params.mcp.0.tools.add: the server already lists a tool add")
    # another tool, renamed, then removed; another server, removed
    mcp.get_by_label("New tool").fill("sub")
    press(b, "Add tool to server 1")
    tool.nth(1).get_by_label("Tool name").fill("")
    expect(tool.nth(1).locator(".field-problems")).to_have_text("params.mcp.0.tools.sub: a tool needs its name on the server")
    tool.nth(1).get_by_label("Tool name").fill("minus")
    expect(tool.nth(1).locator("legend")).to_have_text("Tool minus")
    press(b, "Remove tool minus")
    expect(tool).to_have_count(1)
    press(b, "Add MCP server")
    expect(mcp.locator("details.mcp-server")).to_have_count(2)
    press(b, "Remove MCP server 2")
    expect(mcp.locator("details.mcp-server")).to_have_count(1)
    # the canvas lists the server among the Agent's tools; the agent saves with the entry as RAGFlow keeps it
    expect(node(b, "Agent:1::tools")).to_contain_text("MCP: calc")
    mcp.scroll_into_view_if_needed()
    b.shot("mcp-form", full_page=False)
    b.page.get_by_label("Connect", exact=True).select_option("begin")
    b.page.get_by_label("to", exact=True).select_option("Agent:1")
    press(b, "Connect")
    expect(b.page.locator(".check-state")).to_have_text("Compiles")
    press(b, "Save agent")
    expect(b.page.get_by_role("heading", level=1, name="With MCP")).to_be_visible()
    agent_id = b.page.url.split("#/agents/")[1].split("/")[0]
    params = Api(ui_server, alice_token).ok("GET", f"/agents/{agent_id}")["dsl"]["components"]["Agent:1"]["obj"]["params"]
    assert params["mcp"] == [{"mcp_id": "calc", "tools": {"add": {
        "name": "add", "description": "Adds two numbers.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}}}]
    assert b.errors == []


@pytest.mark.parametrize("path", RAGFLOW_TEMPLATES, ids=[p.stem for p in RAGFLOW_TEMPLATES])
def test_a_ragflow_templates_graph_survives_a_round_trip(browsing, ui_server, alice_token, path):
    """Opened and saved unchanged, the DSL keeps RAGFlow's `graph` as it was; a moved box changes only its
    own position."""
    dsl = json.loads(path.read_text(encoding="utf-8"))["dsl"]
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(dsl, f"Round trip {path.stem}")
    b = browsing()
    b.sign_in(alice_token)
    b.page.goto(f"{b.server.url}/#/agents/{agent_id}/edit")
    expect(node(b, "begin")).to_be_visible()
    save_version(b)
    saved = alice.ok("GET", f"/agents/{agent_id}")["dsl"]
    assert saved["graph"] == dsl["graph"]
    assert saved["components"] == dsl["components"]
    # move begin: only its position changes
    drag(b, node(b, "begin"), 80)
    expect(b.page.get_by_role("button", name="Undo")).to_be_enabled()        # the move is in the DSL
    save_version(b)
    moved = alice.ok("GET", f"/agents/{agent_id}")["dsl"]["graph"]
    was = {n["id"]: n for n in dsl["graph"]["nodes"]}
    now = {n["id"]: n for n in moved["nodes"]}
    assert now["begin"]["position"]["y"] > was["begin"]["position"]["y"]
    assert {k: v for k, v in now["begin"].items() if k != "position"} == {k: v for k, v in was["begin"].items() if k != "position"}
    assert {i: n for i, n in now.items() if i != "begin"} == {i: n for i, n in was.items() if i != "begin"}
    assert moved["edges"] == dsl["graph"]["edges"]


def test_every_component_gets_a_params_form_from_its_params_model(browsing, ui_server, alice_token):
    kinds = [c for c in Api(ui_server, alice_token).ok("GET", "/components")
             if c["kind"] in ("component", "container", "exit", "tool") and c["component_name"] != "Begin"]
    assert len(kinds) > 35
    b = fresh_editor(browsing, alice_token)
    for spec in kinds:
        name = spec["component_name"]
        b.page.get_by_label("Component", exact=True).select_option(name)
        press(b, "Add component")
        form = b.page.get_by_role("form", name=f"Params of {name}:1")
        expect(form).to_be_visible()
        own = [k for k in spec["schema"].get("properties", {}) if k not in spec["common"]]
        # the five sampling values are one field with their switches; a Switch's else and its informational
        # operator list are part of its cases (paramsform.jsx)
        merged = 4 if {"temperature", "top_p"} <= set(own) else 0
        merged += sum(1 for k in ("end_cpn_ids", "operators") if k in own and "conditions" in own)
        fields = ".param-field, fieldset.tools-field, fieldset.mcp-field, fieldset.memory-field, fieldset.source-field, fieldset.rows-field"
        expect(form.locator(fields)).to_have_count(len(own) + len(spec["common"]) - merged)
        b.page.get_by_role("button", name="Close").click()
    assert b.errors == []


def test_the_editor_reads_at_400_pixels(browsing, alice_token):
    b = fresh_editor(browsing, alice_token, width=400)
    b.page.get_by_label("Component", exact=True).select_option("LLM")
    press(b, "Add component")
    expect(b.page.get_by_label("llm_id")).to_be_visible()
    assert b.page.evaluate("document.documentElement.scrollWidth") <= 400
    b.shot("narrow-editor")
    assert b.errors == []
