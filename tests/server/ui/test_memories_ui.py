"""The Memories page (server/ui/web/src/memories.jsx) and the params form's memory fields (memoryfield.jsx) in
Debian's Chromium against a real `canvas2graph serve` (issue 35): a memory made on the page, an agent whose
Message saves to it run from the run view, its exchange listed with the typed memory the memory's (scripted)
chat model extracted after the turn, read, searched, disabled and enabled, forgotten; the Message's "Save to
memory" and a Retrieval searching memories picked by name in the editor; deleting the memory; 400 pixels."""
from __future__ import annotations

import json
import os
import re
import time

import pytest
from playwright.sync_api import expect

from tests.server.helpers import Api, Server, cpn
from tests.server.ui.conftest import ARTIFACTS, UI_SCRIPT
from tests.server.ui.test_inspector import open_agent, send

FACT = "The user drinks green tea every morning."
# the memory's chat model, asked to extract typed memories from an exchange about green tea, names one fact
SCRIPT = {**UI_SCRIPT, "by_message": [{"match": "Exchange:[\\s\\S]*green tea",
                                       "reply": {"content": json.dumps({"semantic": [
                                           {"content": FACT, "valid_at": "", "invalid_at": ""}]})}}]}
QUESTION = "I drink green tea every morning"


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory):
    """The module's own server: its script answers the memory's extraction (the other modules' does not)."""
    tmp = tmp_path_factory.mktemp("ui-memories")
    with Server(str(tmp / "server.db"), tmp, SCRIPT, env=dict(os.environ)) as running:
        yield running


def saver_dsl(memory_id: str) -> dict:
    """begin -> Message "Noted: <query>", saved to the memory."""
    return {"components": {
        "begin": cpn("Begin", {"prologue": "Tell me about your habits."}, ["Message:M"]),
        "Message:M": cpn("Message", {"content": ["Noted: {sys.query}"], "memory_ids": [memory_id]}),
    }}


def shot(b, what: str, locator=None) -> None:
    """A picture for a person to look at (tests/artifacts/ui/memory-ui-<what>.png): the page, or one part of it."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = str(ARTIFACTS / f"memory-ui-{what}.png")
    if locator is None:
        b.page.screenshot(path=path, full_page=True)
    else:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=path)


def exchanges(b):
    return b.page.locator("table.memory-messages-table tbody.exchange")


def refresh_until(b, locator, count: int, seconds: float = 60) -> None:
    """Press Refresh until `locator` matches `count` elements (typed memories are extracted after the turn)."""
    deadline = time.monotonic() + seconds
    while locator.count() != count:
        assert time.monotonic() < deadline, f"never {count}: {locator}"
        b.page.get_by_role("button", name="Refresh").click()
        b.page.wait_for_timeout(500)


def search(b, query: str):
    b.page.get_by_label("Search this memory").fill(query)
    b.page.get_by_role("button", name="Search", exact=True).click()
    return b.page.get_by_role("list", name=f"Found for “{query}”")


def test_a_memory_made_on_the_page_keeps_an_agents_exchanges_to_read_search_disable_and_forget(
        browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_role("navigation", name="Main").get_by_role("link", name="Memories").click()
    b.page.get_by_role("heading", name="Memories", level=1).wait_for()
    expect(b.page.get_by_text("No memories yet")).to_be_visible()

    # a memory that keeps raw exchanges (always) and semantic facts, extracted by its chat model
    form = b.page.get_by_role("form", name="New memory")
    form.get_by_label("Name").fill("Habits")
    raw = form.get_by_role("checkbox", name="Raw")
    expect(raw).to_be_checked()
    expect(raw).to_be_disabled()
    assert form.get_by_label("Chat model").evaluate("e => e.required") is False
    form.get_by_role("checkbox", name="Semantic").check()
    assert form.get_by_label("Chat model").evaluate("e => e.required") is True        # extraction needs it
    form.get_by_label("Chat model").fill("tea@OpenAI")
    shot(b, "create")
    form.get_by_role("button", name="Create memory").click()
    expect(b.page.get_by_role("heading", level=1)).to_have_text("Memory · Habits")
    memory_id = b.page.url.split("#/memories/")[1]
    settings = b.page.locator("section.memory-settings")
    expect(settings).to_contain_text("Raw")
    expect(settings).to_contain_text("Semantic")
    expect(settings).to_contain_text("tea@OpenAI")
    expect(settings).to_contain_text("5 MB")
    expect(settings).to_contain_text(memory_id)
    expect(b.page.get_by_text("No messages yet")).to_be_visible()

    # an agent whose Message saves to it, run from the run view
    agent_id = alice.agent(saver_dsl(memory_id), "Tea saver")
    b.page.goto(f"{ui_server.url}/#/agents")
    open_agent(b, "Tea saver")
    send(b, QUESTION)
    expect(b.page.locator(".message.assistant").last).to_contain_text(f"Noted:{QUESTION}")
    # the Message saves once its answer is out: leaving before the turn ends would cancel it
    expect(b.page.locator(".run-status")).to_have_text("Finished.")
    session_id = b.page.url.split("/sessions/")[1].split("/")[0]

    # the memory lists the exchange, newest first, with the fact extracted from it after the turn
    b.page.goto(f"{ui_server.url}/#/memories/{memory_id}")
    refresh_until(b, exchanges(b), 1)
    exchange = exchanges(b).first
    refresh_until(b, exchange.locator("tr.extracted"), 1)
    row = exchange.locator("tr.raw")
    expect(row).to_contain_text("Exchange")
    expect(row.get_by_role("link", name="Tea saver")).to_have_attribute("href", f"#/agents/{agent_id}")
    expect(row.get_by_role("link", name=f"Open the session {session_id}")).to_have_attribute(
        "href", f"#/agents/{agent_id}/sessions/{session_id}")
    expect(row.locator(".valid-at")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"))
    expect(row.locator(".message-state")).to_have_text("Enabled")
    fact = exchange.locator("tr.extracted")
    expect(fact).to_have_attribute("data-type", "semantic")
    expect(fact.locator(".message-kind")).to_contain_text("Semantic memory")
    # reading a message fetches its content
    raw_id = row.get_attribute("data-message-id")
    fact_id = fact.get_attribute("data-message-id")
    row.locator("summary", has_text="Read").click()
    expect(row.locator(".message-text")).to_have_text(f"User Input: {QUESTION}\nAgent Response: Noted:{QUESTION}")
    fact.locator("summary", has_text="Read").click()
    expect(fact.locator(".message-text")).to_have_text(FACT)
    shot(b, "messages")

    # a search finds the exchange and the fact, with their contents
    found = search(b, "what do I drink in the morning? green tea")
    expect(found.locator("li")).to_have_count(2)
    expect(found).to_contain_text(FACT)
    expect(found).to_contain_text(f"User Input: {QUESTION}")
    shot(b, "search")

    # disabled, the fact is not found; enabled again, it is
    b.page.get_by_role("button", name=f"Disable semantic memory {fact_id}").click()
    expect(fact.locator(".message-state")).to_have_text("Disabled")
    found = search(b, "green tea every morning")
    expect(found.locator("li")).to_have_count(1)
    expect(found.locator("li").first).to_have_attribute("data-type", "raw")
    b.page.get_by_role("button", name=f"Enable semantic memory {fact_id}").click()
    expect(fact.locator(".message-state")).to_have_text("Enabled")

    # forgetting asks first (Escape keeps it); forgotten, the exchange stays listed but no search finds it
    b.page.get_by_role("button", name=f"Forget exchange {raw_id}").click()
    b.page.keyboard.press("Escape")
    expect(b.page.get_by_role("button", name=f"Forget exchange {raw_id}")).to_be_focused()
    b.page.get_by_role("button", name=f"Forget exchange {raw_id}").click()
    row.get_by_role("button", name="Yes, forget").click()
    expect(row.locator(".message-state")).to_contain_text("Forgotten")
    expect(row.get_by_role("button", name=re.compile("Forget|Disable"))).to_have_count(0)
    found = search(b, "green tea every morning")
    expect(found.locator("li")).to_have_count(1)
    expect(found.locator("li").first).to_have_attribute("data-type", "semantic")
    listed = alice.ok("GET", f"/memories/{memory_id}")["messages"]["message_list"]
    assert listed[0]["forget_at"] and listed[0]["extract"][0]["status"] is True
    assert [m["message_type"] for m in alice.ok("GET", "/messages", params={"memory_id": memory_id})] == ["semantic"]
    shot(b, "forgotten")

    # the list: its name, what it keeps, its models and size limit
    b.page.get_by_role("link", name="All memories").click()
    listed_row = b.page.locator(f'tr[data-memory-id="{memory_id}"]')
    expect(listed_row.get_by_role("link", name="Habits", exact=True)).to_be_visible()
    expect(listed_row).to_contain_text("RawSemantic")
    expect(listed_row).to_contain_text("tea@OpenAI")
    expect(listed_row.locator(".memory-size")).to_have_text("5 MB")
    shot(b, "list")

    # at 400 pixels nothing is wider than the window
    narrow = browsing("-narrow", width=400)
    narrow.sign_in(alice_token)
    narrow.page.goto(f"{ui_server.url}/#/memories/{memory_id}")
    expect(exchanges(narrow)).to_have_count(1)
    assert narrow.page.evaluate("document.documentElement.scrollWidth") <= 400
    shot(narrow, "narrow")
    assert b.errors == [] and narrow.errors == []


def test_the_editor_picks_memories_by_name_for_a_message_and_a_retrieval_and_the_page_deletes_one(
        browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    memory_id = alice.ok("POST", "/memories", {"name": "Preferences", "memory_type": ["raw"], "embd_id": "",
                                               "llm_id": ""})["id"]
    agent_id = alice.agent(saver_dsl(memory_id), "Remembering")
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_role("link", name="Edit Remembering on the canvas").click()
    b.page.locator('.editor-canvas .react-flow__node[data-id="Message:M"]').click()
    expect(b.page.get_by_role("heading", name="Message:M")).to_be_visible()

    # the Message saves to the memories ticked by name, its id kept in memory_ids
    saving = b.page.get_by_role("group", name="Save to memory")
    expect(saving.get_by_role("checkbox", name="Preferences")).to_be_checked()
    expect(saving.get_by_label("User id")).to_have_value("")
    saving.get_by_label("User id").fill("{sys.user_id}")
    shot(b, "message-form", b.page.locator("aside.inspector"))

    # a Retrieval searching memories: the source first, then the memories by name; the dataset fields aside
    b.page.get_by_role("button", name="Close").click()
    b.page.get_by_label("Component", exact=True).select_option("Retrieval")
    b.page.get_by_role("button", name="Add component").click()
    expect(b.page.get_by_role("heading", name="Retrieval:1")).to_be_visible()
    source = b.page.get_by_role("group", name="Search in")
    expect(source.get_by_role("radio", name="Datasets")).to_be_checked()
    expect(b.page.get_by_role("group", name="Memories to search")).to_be_hidden()      # aside while datasets are searched
    expect(b.page.locator("details.unused-fields summary")).to_have_text("Not used when searching datasets")
    source.get_by_role("radio", name="Memories").check()
    searching = b.page.get_by_role("group", name="Memories to search")
    expect(searching.get_by_role("checkbox", name="Preferences")).not_to_be_checked()
    searching.get_by_role("checkbox", name="Preferences").check()
    expect(b.page.get_by_label("dataset_ids")).to_be_hidden()
    expect(b.page.locator("details.unused-fields summary")).to_have_text("Not used when searching memories")
    shot(b, "retrieval-form", b.page.locator("aside.inspector"))
    with b.page.expect_response(lambda r: r.request.method == "PUT" and "/api/v1/agents/" in r.url) as reply:
        b.page.get_by_role("button", name="Save as a new version").click()
    assert reply.value.ok
    params = {cid: c["obj"]["params"] for cid, c in alice.ok("GET", f"/agents/{agent_id}")["dsl"]["components"].items()}
    assert params["Message:M"]["memory_ids"] == [memory_id] and params["Message:M"]["user_id"] == "{sys.user_id}"
    assert params["Retrieval:1"]["retrieval_from"] == "memory" and params["Retrieval:1"]["memory_ids"] == [memory_id]

    # deleted on the page (asks first), the Message's picker names its id as a memory that does not exist
    b.page.goto(f"{ui_server.url}/#/memories")
    b.page.get_by_role("button", name="Delete the memory “Preferences”").click()
    b.page.get_by_role("button", name="Yes, delete").click()
    expect(b.page.locator(f'tr[data-memory-id="{memory_id}"]')).to_have_count(0)
    assert alice.call("GET", f"/memories/{memory_id}/config")["code"] == 404
    b.page.goto(f"{ui_server.url}/#/agents/{agent_id}/edit")
    b.page.locator('.editor-canvas .react-flow__node[data-id="Message:M"]').click()
    missing = b.page.get_by_role("group", name="Save to memory").get_by_role("checkbox", name=memory_id)
    expect(missing).to_be_checked()
    expect(b.page.locator(".missing-memory")).to_contain_text("no such memory")
    missing.click()          # unticked, it leaves the list
    expect(b.page.locator(".missing-memory")).to_have_count(0)
    assert b.errors == []
