"""The agent's Schedules panel (server/ui/web/src/schedules.jsx) in Debian's Chromium against a real `canvas2graph
serve`: a schedule made from the form (presets read in words, the browser's time zone, Begin's own fields, a server
error shown at the field it names), listed with its next run, its first run linked and opened in the run view,
disabled, edited and enabled again, and deleted after a confirmation that Escape cancels."""
from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.server.helpers import Api, cpn, wait_for
from tests.server.ui.conftest import ARTIFACTS
from tests.server.ui.test_inspector import open_agent

EVERY_SECOND = "* * * * * *"            # a sixth field is seconds; the server's workers look every 5 s

# Begin asks for a topic (a form the run view shows before a chat); the answer names it
REPORT_DSL = {"components": {
    "begin": cpn("Begin", {"mode": "conversational", "prologue": "Reports on a topic.",
                           "inputs": {"topic": {"type": "line", "name": "Topic", "optional": False}}}, ["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}: {begin@topic}"}]},
                 ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Report on {begin@topic}: {LLM:A@content}"]}),
}}


def panel_shot(panel, name: str) -> None:
    """A picture of the panel alone (tests/artifacts/ui), for a person to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    panel.scroll_into_view_if_needed()
    panel.screenshot(path=str(ARTIFACTS / f"schedules-{name}.png"))


def answered(api: Api, agent_id: str, session_id: str) -> bool:
    messages = api.ok("GET", f"/agents/{agent_id}/sessions/{session_id}")["messages"]
    return any(m["role"] == "assistant" and m.get("content") for m in messages)


def test_a_schedule_made_in_the_panel_runs_is_opened_disabled_edited_and_deleted(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(REPORT_DSL, "Scheduled reports")
    # one made through the API, to be read in words beside the one the form makes
    alice.ok("POST", f"/agents/{agent_id}/schedules", {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris",
                                                       "query": "Weekly digest", "inputs": {"topic": "sales"},
                                                       "enabled": False})
    b = browsing()
    b.sign_in(alice_token)
    open_agent(b, "Scheduled reports")
    panel = b.page.locator("section.schedules")
    expect(panel.get_by_role("heading", name="Schedules")).to_be_visible()
    rows = panel.locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".schedule-reading")).to_have_text("Weekdays at 09:00")
    expect(rows.first.locator(".schedule-zone")).to_have_text("Europe/Paris")
    expect(rows.first).to_contain_text("Topic: sales")
    expect(rows.first.locator(".next-run")).to_have_text("none: disabled")

    # the form: presets write the cron expression and say it in words; the zone is the browser's
    panel.get_by_role("button", name="New schedule").click()
    form = panel.get_by_role("form", name="New schedule")
    repeat = form.get_by_label("Repeat")
    expect(repeat).to_be_focused()
    cron = form.get_by_label("Cron expression")
    reading = form.locator(".cron-reading")
    zone = b.page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    expect(form.get_by_label("Time zone")).to_have_value(zone)
    expect(cron).to_have_value("0 9 * * *")
    expect(reading).to_contain_text("every day at 09:00")
    # Begin's input is the run view's own field, labelled with its name
    topic = form.get_by_label("Topic")
    expect(topic).to_have_attribute("required", "")
    topic.fill("cats")
    form.get_by_label(re.compile("^Message")).fill("daily report")
    form.get_by_label("Time zone").select_option("Europe/Paris")
    repeat.select_option(label="On weekdays (Mon–Fri)")
    form.get_by_label("At", exact=True).fill("07:30")
    expect(cron).to_have_value("30 7 * * 1-5")
    expect(reading).to_have_text("Runs weekdays at 07:30 (Europe/Paris time).")
    panel_shot(panel, "form-preset")
    repeat.select_option(label="Every hour")
    form.get_by_label("At minute").fill("15")
    expect(cron).to_have_value("15 * * * *")
    expect(reading).to_contain_text("every hour at 15 min past")
    form.get_by_label("Time zone").select_option("Asia/Tokyo")

    # the server refuses an expression: its reason shows at the cron field, which takes the focus
    cron.fill("every day")
    expect(repeat).to_have_value("custom")
    expect(reading).to_contain_text("custom expression")
    form.get_by_role("button", name="Create schedule").click()
    problem = form.locator('[data-field="cron"] .field-error')
    expect(problem).to_contain_text("is no cron expression")
    expect(cron).to_have_attribute("aria-invalid", "true")
    expect(cron).to_be_focused()
    assert "schedule:" not in problem.inner_text()
    panel_shot(panel, "form-error")

    cron.fill(EVERY_SECOND)
    expect(problem).to_have_count(0)
    expect(reading).to_contain_text("every second")
    panel_shot(panel, "form")
    form.get_by_role("button", name="Create schedule").click()
    expect(form).to_have_count(0)
    expect(panel.get_by_role("button", name="New schedule")).to_be_focused()
    expect(b.page.locator("#notice")).to_contain_text("created")

    # listed with its next run in its zone
    expect(rows).to_have_count(2)
    row = rows.nth(1)
    expect(row.locator(".schedule-reading")).to_have_text("Every second")
    expect(row.locator(".schedule-cron")).to_have_text(EVERY_SECOND)
    expect(row.locator(".schedule-zone")).to_have_text("Asia/Tokyo")
    expect(row).to_contain_text("“daily report”")
    expect(row).to_contain_text("Topic: cats")
    expect(row.locator(".next-run time")).to_have_text(re.compile(r"\d\d:\d\d:\d\d"))
    made = [s for s in alice.ok("GET", f"/agents/{agent_id}/schedules") if s["cron"] == EVERY_SECOND][0]
    assert made["timezone"] == "Asia/Tokyo" and made["query"] == "daily report"
    assert made["inputs"] == {"topic": {"type": "line", "value": "cats"}}

    # its first run: counted, linked, and listed with the sessions, without reloading the page
    link = row.get_by_role("link", name="Open its session")
    expect(link).to_be_visible(timeout=45_000)
    expect(row.locator(".runs")).to_have_text(re.compile(r"^[1-9]\d*$"))
    expect(row.locator(".last-run time")).to_be_visible()
    scheduled = b.page.locator("nav.sessions .session-item").filter(has_text="daily report").first
    expect(scheduled.locator(".session-meta")).to_contain_text("scheduled")
    expect(row.locator(".next-run time")).to_be_visible()
    panel_shot(panel, "list")

    # disabled from its row: no next run, and the panel stops asking
    row.get_by_role("button", name="Disable the schedule “every second”").click()
    expect(row.locator(".next-run")).to_have_text("none: disabled")
    expect(row.locator(".tag")).to_have_text("Disabled")
    expect(b.page.locator("#notice")).to_contain_text("disabled")
    panel_shot(panel, "list-disabled")
    b.shot("schedules-panel")

    # the linked session opens in the run view with the question and the answer of that run
    session_id = link.get_attribute("href").rsplit("/", 1)[-1]
    wait_for(lambda: answered(alice, agent_id, session_id), timeout=30, what="the scheduled run's answer")
    link.click()
    expect(b.page).to_have_url(re.compile(f"#/agents/{agent_id}/sessions/{session_id}$"))
    chat = b.page.locator(".messages")
    expect(chat.locator(".message.user")).to_have_text(re.compile("daily report"))
    # (RAGFlow drops the spaces next to a reference in streamed Message text: "Report oncats:")
    expect(chat.locator(".message.assistant").last).to_contain_text(re.compile(r"Report on ?cats:"))
    expect(b.page.locator(f'nav.sessions a[data-session-id="{session_id}"]')).to_have_attribute("aria-current", "page")
    b.shot("schedules-session")

    # back on the agent's page: edit it into a weekday schedule, then enable it again from its row
    b.page.go_back()
    panel = b.page.locator("section.schedules")
    row = panel.locator("tbody tr").nth(1)
    runs = alice.ok("GET", f"/agents/{agent_id}/schedules/{made['id']}")["runs"]
    row.get_by_role("button", name="Edit the schedule “every second”").click()
    form = panel.get_by_role("form", name="Edit the schedule “every second”")
    expect(form.get_by_label("Repeat")).to_have_value("custom")
    expect(form.get_by_label("Cron expression")).to_have_value(EVERY_SECOND)
    expect(form.get_by_label("Topic")).to_have_value("cats")
    expect(form.get_by_label("Enabled")).not_to_be_checked()
    form.get_by_label("Repeat").select_option("weekdays")
    form.get_by_label("At", exact=True).fill("09:00")
    form.get_by_role("button", name="Save changes").click()
    expect(form).to_have_count(0)
    expect(row.locator(".schedule-reading")).to_have_text("Weekdays at 09:00")
    expect(row.get_by_role("button", name="Edit the schedule “weekdays at 09:00”")).to_be_focused()
    row.get_by_role("button", name="Enable the schedule “weekdays at 09:00”").click()
    expect(row.locator(".next-run time")).to_have_text(re.compile(r"09:00"))
    expect(row.locator(".tag")).to_have_count(0)
    assert alice.ok("GET", f"/agents/{agent_id}/schedules/{made['id']}")["runs"] == runs

    # delete: Escape keeps it and gives the focus back, "Yes, delete" deletes it
    delete = row.get_by_role("button", name="Delete the schedule “weekdays at 09:00”")
    delete.click()
    confirm = row.get_by_role("group", name="Delete the schedule “weekdays at 09:00”?")
    expect(confirm.get_by_role("button", name="Keep")).to_be_focused()
    b.page.keyboard.press("Escape")
    expect(confirm).to_have_count(0)
    expect(delete).to_be_focused()
    delete.press("Enter")
    row.get_by_role("button", name="Yes, delete").click()
    expect(panel.locator("tbody tr")).to_have_count(1)
    expect(b.page.locator("#notice")).to_contain_text("deleted")
    assert [s["cron"] for s in alice.ok("GET", f"/agents/{agent_id}/schedules")] == ["0 9 * * 1-5"]
    # the sessions it ran stay
    assert answered(alice, agent_id, session_id)
    assert b.errors == []


def test_the_schedules_panel_reads_at_400_pixels(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(REPORT_DSL, "Narrow schedules")
    alice.ok("POST", f"/agents/{agent_id}/schedules", {"cron": "0 9 * * 1-5", "timezone": "Europe/Paris",
                                                       "query": "Weekly digest", "inputs": {"topic": "sales"},
                                                       "enabled": False})
    b = browsing(width=400)
    b.sign_in(alice_token)
    open_agent(b, "Narrow schedules")
    panel = b.page.locator("section.schedules")
    expect(panel.locator("tbody tr")).to_have_count(1)
    panel.get_by_role("button", name="New schedule").click()
    expect(panel.get_by_role("form", name="New schedule")).to_be_visible()
    assert b.page.evaluate("document.documentElement.scrollWidth") <= 400
    panel_shot(panel, "narrow")
    assert b.errors == []
