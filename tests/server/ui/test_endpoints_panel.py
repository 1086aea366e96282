"""The run page's panel of the agent's MCP, A2A and LangGraph URLs (server/ui/web/src/endpoints.jsx), in a real
browser: collapsed at first, then each protocol's URLs and the snippet the API gives, with a copy button."""
from __future__ import annotations

from playwright.sync_api import expect

from tests.server.helpers import Api
from tests.server.ui.test_inspector import CHAT_DSL, open_agent


def test_the_run_page_shows_the_agents_protocol_urls_with_snippets_to_copy(browsing, ui_server, alice_token):
    api = Api(ui_server, alice_token)
    agent_id = api.agent(CHAT_DSL, "Served three ways")
    endpoints = api.ok("GET", f"/agents/{agent_id}")["endpoints"]
    b = browsing()
    b.sign_in(alice_token)
    open_agent(b, "Served three ways")
    panel = b.page.locator("details.endpoints")
    expect(panel).not_to_have_attribute("open", "")
    panel.get_by_text("Use this agent over MCP, A2A or LangGraph").click()
    for protocol in ("mcp", "a2a", "langgraph"):
        entry = panel.locator(f'.endpoint[data-protocol="{protocol}"]')
        expect(entry.locator("dd code").first).to_have_text(endpoints[protocol]["url"])
        expect(entry.locator("pre.endpoint-snippet")).to_have_text(endpoints[protocol]["snippet"])
        expect(entry.get_by_role("button", name="Copy snippet")).to_be_enabled()
    expect(panel.locator('.endpoint[data-protocol="langgraph"] dd code').nth(1)).to_have_text(agent_id)
    b.shot("endpoints")                 # for a person to look at (tests/artifacts/ui)
    panel.locator('.endpoint[data-protocol="mcp"]').get_by_role("button", name="Copy snippet").click()
    expect(b.page.locator("#notice")).to_contain_text("snippet")       # copied, or told how to copy it
    assert b.errors == []
