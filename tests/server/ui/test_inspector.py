"""The run inspector in a real browser (Debian's Chromium driven by Playwright) against a real
`canvas2graph serve` with a scripted model: signing in, building agents, running them with their graph
lighting up, forms, cancelling, the trace and forks, tenants, and model text that never becomes markup."""
from __future__ import annotations

import json
import re
import subprocess

import httpx
from playwright.sync_api import expect

from tests.server.helpers import BROKEN_DSL, CLI, FAILING_DSL, REPO, Api, cpn
from tests.server.ui.conftest import Browsing

# begin -> LLM:A -> Message:M, which echoes the question
CHAT_DSL = {"components": {
    "begin": cpn("Begin", {"prologue": "Hello from the chat agent."}, ["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                 ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Turn {sys.conversation_turns}: {LLM:A@content} You said: {sys.query}"]}),
}}

# Begin asks for a topic; UserFillUp:Ask pauses for a form of every field type; Message:Out shows the answers
FORM_DSL = {"components": {
    "begin": cpn("Begin", {"mode": "conversational", "prologue": "Tell me a topic.",
                           "inputs": {"topic": {"type": "line", "name": "Topic", "optional": False}}}, ["LLM:Draft"]),
    "LLM:Draft": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "Draft on {begin@topic}"}]},
                     ["UserFillUp:Ask"]),
    "UserFillUp:Ask": cpn("UserFillUp", {"enable_tips": True, "tips": "Draft: {LLM:Draft@content} Any feedback?", "inputs": {
        "feedback": {"type": "line", "name": "Feedback", "optional": False},
        "detail": {"type": "paragraph", "name": "Details", "optional": True},
        "tone": {"type": "options", "name": "Tone", "options": ["calm", "bold"], "optional": False},
        "count": {"type": "integer", "name": "How many", "optional": False},
        "urgent": {"type": "boolean", "name": "Urgent", "optional": True},
        "notes": {"type": "file", "name": "Notes file", "optional": True},
    }}, ["Message:Out"]),
    "Message:Out": cpn("Message", {"content": [
        "topic={begin@topic} feedback={UserFillUp:Ask@feedback} tone={UserFillUp:Ask@tone} "
        "count={UserFillUp:Ask@count} urgent={UserFillUp:Ask@urgent} notes={UserFillUp:Ask@notes}"]}),
}}

# begin -> LLM:Slow (about 4 s of streaming) -> Message:S -> LLM:After -> Message:After. A cancelled turn
# ends at the next component boundary (as RAGFlow's): after Message:S, before LLM:After.
SLOW_DSL = {"components": {
    "begin": cpn("Begin", {}, ["LLM:Slow"]),
    "LLM:Slow": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                    ["Message:S"]),
    "Message:S": cpn("Message", {"content": ["{LLM:Slow@content}"]}, ["LLM:After"]),
    "LLM:After": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "more"}]},
                     ["Message:After"]),
    "Message:After": cpn("Message", {"content": ["{LLM:After@content}"]}),
}}

# the README's `.venv/bin/canvas2graph`, run with this interpreter (the tests' venv may live elsewhere)
CLI_LINE = " ".join(CLI)
XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def component(b: Browsing, cid: str):
    """A component's entry in the run page's state list."""
    return b.page.locator(f'ol.states li[data-component="{cid}"]')


def box(b: Browsing, cid: str):
    """A component's box on the canvas."""
    return b.page.locator(f'.react-flow__node[data-id="{cid}"] .c2g-node')


def send(b: Browsing, text: str) -> None:
    b.page.get_by_role("textbox", name="Your message").fill(text)
    b.page.get_by_role("button", name="Send", exact=True).click()


def watch_states(b: Browsing) -> None:
    """Record every state each component of the run page's list takes from now on (a MutationObserver in
    the page), so a test sees a state that lasted only a moment."""
    b.page.evaluate("""() => {
        window.__seen = {};
        if (window.__watcher) window.__watcher.disconnect();
        window.__watcher = new MutationObserver(records => {
            for (const r of records) {
                const id = r.target.dataset.component;
                if (id) (window.__seen[id] = window.__seen[id] || []).push(r.oldValue);
            }
        });
        window.__watcher.observe(document.querySelector('ol.states'),
                                 {attributes: true, attributeOldValue: true, subtree: true,
                                  attributeFilter: ['data-state']});
    }""")


def seen_states(b: Browsing) -> dict[str, list[str]]:
    """Each component's states since watch_states(), in order (repeats of a state counted once)."""
    return b.page.evaluate("""() => {
        const out = {};
        for (const item of document.querySelectorAll('ol.states li')) {
            const states = [...(window.__seen[item.dataset.component] || []), item.dataset.state];
            out[item.dataset.component] = states.filter((s, i) => i === 0 || s !== states[i - 1]);
        }
        return out;
    }""")


def open_agent(b: Browsing, title: str) -> None:
    b.page.get_by_role("link", name=title, exact=True).click()
    b.page.get_by_role("heading", level=1, name=title, exact=True).wait_for()
    expect(b.page.locator(".react-flow__node .c2g-node").first).to_be_visible()


def at_new_agent(browsing, ui_server, token: str, dsl: dict, title: str) -> Browsing:
    """A browser signed in with `token`, on the run page of a new agent `title` holding `dsl`."""
    Api(ui_server, token).agent(dsl, title)
    b = browsing()
    b.sign_in(token)
    open_agent(b, title)
    return b


# --- serving -------------------------------------------------------------------------------------------
def test_the_page_and_its_bundle_come_with_a_strict_content_security_policy(ui_server):
    page = httpx.get(ui_server.url + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    # no inline script or style: the page loads its bundle from this server, nothing from the web
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", page.text, re.S)
    assert scripts and all('src="/ui/' in attrs and not body.strip() for attrs, body in scripts)
    assert "<style" not in page.text and " style=" not in page.text
    assert "http://" not in page.text and "https://" not in page.text
    assets = re.findall(r'(?:src|href)="(/ui/[^"]+)"', page.text)
    assert "/ui/assets/app.js" in assets and "/ui/assets/index.css" in assets
    for asset in assets:
        reply = httpx.get(ui_server.url + asset)
        assert reply.status_code == 200, asset
        assert reply.headers["content-security-policy"] == csp
    # only the UI's own files: nothing beside or above them
    for path in ("/ui/", "/ui/../app.py", "/ui/%2e%2e/__init__.py", "/ui/nope.js", "/ui/assets/"):
        assert httpx.get(ui_server.url + path).status_code == 404, path
    # the API is where it was, and still wants a token
    assert httpx.get(ui_server.url + "/api/v1/agents").json()["code"] == 109        # RAGFlow: authentication error


def test_the_sources_write_html_in_one_place_only_and_it_is_sanitized():
    """Model text becomes markup only through markdown.jsx, which escapes raw HTML and runs DOMPurify."""
    sources = REPO / "server" / "ui" / "web" / "src"
    writers = {p.name for p in sources.rglob("*.js*") if re.search(r"innerHTML|dangerouslySetInnerHTML|insertAdjacentHTML|document\.write",
                                                                     p.read_text(encoding="utf-8"))}
    assert writers == {"markdown.jsx"}
    markdown = (sources / "markdown.jsx").read_text(encoding="utf-8")
    assert "DOMPurify.sanitize(" in markdown and "__html: markdownHtml(" in markdown


# --- signing in and agents ------------------------------------------------------------------------------
def test_signing_in_checks_the_token_and_keeps_it_out_of_urls(browsing, alice_token):
    b = browsing()
    b.page.goto(b.server.url + "/")
    b.page.get_by_label("API token").fill("not-a-token")
    b.page.get_by_role("button", name="Sign in").click()
    expect(b.page.get_by_role("alert")).to_contain_text("not valid")
    b.shot("sign-in")
    b.sign_in(alice_token)
    assert alice_token not in b.page.url
    assert alice_token not in b.page.content()
    assert b.page.evaluate("sessionStorage.getItem('canvas2graph.token')") == alice_token
    b.page.get_by_role("button", name="Sign out").click()
    expect(b.page.get_by_label("API token")).to_be_visible()
    assert b.page.evaluate("sessionStorage.getItem('canvas2graph.token')") is None
    assert b.errors == []


def test_a_defective_dsl_shows_its_diagnostic_against_component_and_field_and_is_not_saved(browsing, alice_token):
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_label("Title").fill("Broken one")
    b.page.get_by_label("Or upload a DSL file").set_input_files(
        files=[{"name": "broken.json", "mimeType": "application/json", "buffer": json.dumps(BROKEN_DSL).encode()}])
    row = b.page.locator('table.diagnostics tr[data-component="Message:M"]')
    expect(row).to_contain_text("params.content.0")
    expect(row).to_contain_text("LLM:Missing")
    expect(row).to_contain_text("error")
    b.page.get_by_role("button", name="Save agent").click()
    expect(b.page.locator(".check-result .error").first).to_contain_text("before saving")
    b.shot("diagnostics")
    assert b.page.get_by_role("link", name="Broken one").count() == 0

    # the good one: uploaded, checked, saved, listed; then renamed, its DSL downloaded, deleted
    b.page.get_by_label("Title").fill("Good one")
    b.page.get_by_label("Or upload a DSL file").set_input_files(
        files=[{"name": "good.json", "mimeType": "application/json", "buffer": json.dumps(CHAT_DSL).encode()}])
    expect(b.page.locator(".check-result .ok")).to_contain_text("compiles")
    assert "null" not in b.page.locator(".check-result").inner_text()     # no diagnostics: no table, no "null"
    b.page.get_by_role("button", name="Save agent").click()
    # a saved agent opens at once; it is listed with the others
    expect(b.page.get_by_role("heading", level=1, name="Good one")).to_be_visible()
    b.page.get_by_role("link", name="Agents", exact=True).click()
    expect(b.page.get_by_role("link", name="Good one", exact=True)).to_be_visible()
    b.page.get_by_role("button", name="Rename Good one").click()
    b.page.get_by_label("New title").fill("Good two")
    b.page.get_by_label("New title").press("Enter")
    expect(b.page.get_by_role("link", name="Good two", exact=True)).to_be_visible()
    with b.page.expect_download() as download:
        b.page.get_by_role("button", name="Download the DSL of Good two").click()
    assert json.loads(open(download.value.path()).read()) == CHAT_DSL
    b.page.get_by_role("button", name="Delete Good two").click()
    b.page.get_by_role("button", name="Yes, delete").click()
    expect(b.page.get_by_role("link", name="Good two", exact=True)).to_have_count(0)
    assert b.errors == []


def test_an_agent_stored_with_errors_shows_them_on_its_run_page(browsing, ui_server, alice_token):
    Api(ui_server, alice_token).agent(BROKEN_DSL, "Stored broken")        # the API keeps drafts with errors
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_role("link", name="Stored broken", exact=True).click()
    expect(b.page.get_by_role("heading", name=re.compile("does not compile"))).to_be_visible()
    expect(b.page.locator('table.diagnostics tr[data-component="Message:M"]')).to_contain_text("params.content.0")
    send(b, "hi")
    expect(b.page.locator(".message.notice-error")).to_contain_text("does not compile")
    assert b.errors == []


def test_a_shipped_template_fills_in_the_new_agent(browsing, alice_token):
    b = browsing()
    b.sign_in(alice_token)
    b.page.get_by_label("Start from a template").select_option(label="Support desk")
    expect(b.page.get_by_label("Title")).to_have_value("Support desk")
    assert '"components"' in b.page.get_by_label("DSL (JSON)").input_value()
    b.page.get_by_role("button", name="Check").click()
    expect(b.page.locator(".check-result .ok")).to_contain_text("compiles")


# --- running ---------------------------------------------------------------------------------------------
def test_two_turns_stream_while_the_components_light_up_and_the_session_reopens(browsing, ui_server, alice_token):
    Api(ui_server, alice_token).agent(CHAT_DSL, "Chat")
    b = browsing()
    b.sign_in(alice_token)
    b.shot("agents")
    open_agent(b, "Chat")
    expect(b.page.locator(".message.assistant").first).to_have_text(re.compile("Hello from the chat agent."))
    expect(component(b, "LLM:A")).to_have_attribute("data-state", "waiting")

    for turn, question in ((1, "first question"), (2, "second question")):
        watch_states(b)
        send(b, question)
        expect(b.page.locator(".message.assistant").last).to_have_text(
            re.compile(rf"Turn{turn}:Answer 1 from LLM:A\. ?You said:{question}"))
        expect(b.page.get_by_role("status").filter(has_text="Finished.")).to_be_visible()
        # every component went through its states in order, as its events arrived
        # (a new turn first puts the last one's states back to waiting)
        lifecycle = ["waiting", "running", "done"] if turn == 1 else ["done", "waiting", "running", "done"]
        assert seen_states(b) == {"begin": lifecycle, "LLM:A": lifecycle, "Message:M": lifecycle}
        expect(component(b, "LLM:A")).to_contain_text(re.compile(r"done \(\d+ ms\)"))
        expect(box(b, "LLM:A")).to_have_class(re.compile("state-done"))
        b.shot(f"run-turn-{turn}")
    session_url = b.page.url
    assert "/sessions/" in session_url
    # nothing the page was built from shows as a stray "null" (Element.append writes it for a null child)
    assert "null" not in b.page.locator("main").inner_text()

    # reopening the session shows its history
    b.page.get_by_role("link", name="+ New session").click()
    expect(b.page.locator(".message")).to_have_count(1)
    b.page.locator("a[data-session-id]").first.click()
    expect(b.page.locator(".message.user")).to_have_count(2)
    expect(b.page.locator(".message.assistant").last).to_contain_text("second question")
    assert b.errors == []


def test_begin_and_user_fill_up_forms_are_real_fields_that_resume_the_session(browsing, ui_server, alice_token, tmp_path):
    b = at_new_agent(browsing, ui_server, alice_token, FORM_DSL, "Forms")
    b.page.get_by_label("Topic").fill("coffee")
    b.page.get_by_role("button", name="Start").click()

    form = b.page.locator("form.inputs-form").last
    expect(form.get_by_role("heading")).to_have_text("The agent asks")
    expect(form).to_contain_text("Draft: Answer 1 from LLM:Draft. Any feedback?")
    expect(component(b, "UserFillUp:Ask")).to_have_attribute("data-state", "paused")
    expect(box(b, "UserFillUp:Ask")).to_have_class(re.compile("state-paused"))
    expect(b.page.get_by_role("status").filter(has_text="Paused")).to_be_visible()
    b.shot("form-paused")
    # the paused session, reopened, asks again, its graph as the turn left it
    b.page.reload()
    form = b.page.locator("form.inputs-form").last
    expect(form.get_by_role("heading")).to_have_text("The agent asks")
    expect(form).to_contain_text("Draft: Answer 1 from LLM:Draft. Any feedback?")
    expect(component(b, "UserFillUp:Ask")).to_have_attribute("data-state", "paused")
    expect(component(b, "LLM:Draft")).to_have_attribute("data-state", "done")
    form.get_by_role("textbox", name="Feedback").fill("shorter")
    form.get_by_role("textbox", name="Details (optional)").fill("line one\nline two")
    form.get_by_label("Tone").select_option("bold")
    form.get_by_role("spinbutton", name="How many").fill("3")
    form.get_by_role("checkbox", name="Urgent").check()
    notes = tmp_path / "notes.txt"
    notes.write_text("hello-from-the-notes-file")
    form.get_by_label("Notes file").set_input_files(str(notes))
    form.get_by_role("button", name="Send answer").click()

    answer = b.page.locator(".message.assistant").last
    # (a streamed Message drops the spaces next to a reference, as RAGFlow's does)
    expect(answer).to_contain_text(re.compile(r"topic=coffee ?feedback=shorter ?tone=bold ?count=3 ?urgent=true", re.I))
    expect(answer).to_contain_text("hello-from-the-notes-file")
    expect(component(b, "UserFillUp:Ask")).to_have_attribute("data-state", "done")
    expect(component(b, "Message:Out")).to_have_attribute("data-state", "done")
    b.shot("form-answered")
    assert b.errors == []


def test_cancel_stops_a_long_turn(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, SLOW_DSL, "Slow")
    send(b, "take your time")
    expect(b.page.locator(".message.assistant").last).to_contain_text("word0")
    expect(component(b, "LLM:Slow")).to_have_attribute("data-state", "running")
    b.page.get_by_role("button", name="Cancel").click()           # ("Cancelling" shows until it ends: at once)
    expect(b.page.locator(".message.notice-warning")).to_contain_text("cancelled", timeout=30_000)
    expect(b.page.get_by_role("status").filter(has_text="Cancelled.")).to_be_visible()
    # the cancel stops the turn at once: the Message streaming LLM:Slow's answer is cancelled mid-way
    expect(component(b, "Message:S")).to_have_attribute("data-state", "cancelled")
    expect(component(b, "LLM:After")).not_to_have_attribute("data-state", "done")      # never ran
    expect(b.page.locator(".message.assistant")).to_have_count(1)      # LLM:After never answered
    expect(b.page.locator(".message.notice-error")).to_have_count(0)   # a cancelled component is no error
    expect(b.page.get_by_role("button", name="Send", exact=True)).to_be_enabled()
    b.shot("cancelled")


def test_a_failing_component_turns_red_with_its_message(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, FAILING_DSL, "Fails")
    send(b, "anything")
    expect(component(b, "LLM:Fails")).to_have_attribute("data-state", "error")
    expect(component(b, "LLM:Fails")).to_contain_text("the provider is down")
    expect(box(b, "LLM:Fails")).to_have_class(re.compile("state-error"))
    expect(b.page.locator(".message.notice-error").first).to_contain_text("the provider is down")
    expect(b.page.get_by_role("status").filter(has_text="Finished with an error.")).to_be_visible()
    expect(component(b, "Message:M")).to_contain_text("stopped by the error")     # started, never finished
    b.shot("error")


# DocGenerator writes a PDF that the Message offers as a download
DOC_DSL = {"components": {
    "begin": cpn("Begin", {}, ["DocGenerator:D"]),
    "DocGenerator:D": cpn("DocGenerator", {"output_format": "pdf", "content": "# Minutes\n\n{sys.query}",
                                           "filename": "minutes"}, ["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Your document: {DocGenerator:D@download}"]}),
}}


def test_a_file_the_run_produced_is_a_download_link_fetched_with_the_token(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, DOC_DSL, "Minutes")
    send(b, "We agreed.")
    button = b.page.get_by_role("button", name="Download minutes.pdf")
    with b.page.expect_download() as download:
        button.click()
    assert download.value.suggested_filename == "minutes.pdf"
    assert open(download.value.path(), "rb").read().startswith(b"%PDF")
    assert download.value.url.startswith("blob:")          # no link carries the token
    b.shot("download")


def test_an_answer_from_a_knowledge_base_lists_its_sources(browsing, ui_server, alice_token):
    index = subprocess.run(CLI + ["index", "fixtures/kb/docs", "--kb", "support-kb", "--db", ui_server.db, "--quiet"],
                           cwd=REPO, capture_output=True, text=True)
    assert index.returncode == 0, index.stderr
    b = at_new_agent(browsing, ui_server, alice_token, json.loads((REPO / "fixtures/kb/kb_answer.json").read_text()), "Support KB")
    send(b, "I was charged twice for my order")
    # the first retrieval loads the embedding model: on a busy machine that takes a while
    expect(b.page.get_by_role("status").filter(has_text=re.compile("^Finished"))).to_be_visible(timeout=90_000)
    sources = b.page.locator(".message.assistant .citations").last
    sources.locator("summary").click()
    expect(sources).to_contain_text("refunds.md")
    b.shot("sources")


# --- safety ---------------------------------------------------------------------------------------------
def test_a_script_in_an_answer_is_shown_as_text_and_never_runs(browsing, ui_server, alice_token):
    b = at_new_agent(browsing, ui_server, alice_token, CHAT_DSL, "Echo")
    send(b, XSS)
    answer = b.page.locator(".message.assistant").last
    expect(answer).to_contain_text("<script>window.__pwned = 1</script>")
    expect(b.page.locator(".message.user").last).to_have_text(re.compile(re.escape(XSS)))
    assert b.page.evaluate("window.__pwned") is None
    assert b.page.locator("main script, main img").count() == 0
    b.shot("script-as-text")


def test_a_second_tenant_sees_none_of_the_first_ones_agents_or_sessions(browsing, ui_server, alice_token, bob_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(CHAT_DSL, "Alice private")
    session_id = alice.stream("/agents/chat/completions", {"agent_id": agent_id, "query": "hi", "stream": True})[0]["session_id"]
    b = browsing()
    b.sign_in(bob_token)
    expect(b.page.get_by_text("No agents yet")).to_be_visible()
    assert b.page.get_by_role("link", name="Alice private").count() == 0
    for path in (f"#/agents/{agent_id}", f"#/agents/{agent_id}/sessions/{session_id}",
                 f"#/agents/{agent_id}/sessions/{session_id}/trace"):
        b.page.goto(f"{b.server.url}/{path}")
        expect(b.page.get_by_role("alert")).to_contain_text("not found")
        assert "hi" not in b.page.locator("main").inner_text().split()
    b.shot("other-tenant")


# --- layout ---------------------------------------------------------------------------------------------
def test_the_run_page_reads_on_a_narrow_window_and_works_from_the_keyboard(browsing, ui_server, alice_token):
    Api(ui_server, alice_token).agent(CHAT_DSL, "Narrow")
    b = browsing()
    b.sign_in(alice_token)
    b.page.set_viewport_size({"width": 390, "height": 800})
    open_agent(b, "Narrow")
    # nothing wider than the window
    assert b.page.evaluate("document.documentElement.scrollWidth") <= 390
    b.page.get_by_role("textbox", name="Your message").focus()
    b.page.keyboard.type("from the keyboard")
    b.page.keyboard.press("Enter")
    expect(b.page.locator(".message.assistant").last).to_contain_text("from the keyboard")
    b.page.keyboard.press("Tab")
    focused = b.page.evaluate("document.activeElement.tagName + ':' + getComputedStyle(document.activeElement).outlineStyle")
    assert focused.split(":")[1] != "none", focused
    b.shot("narrow")
    # the trace and the agents page read at the same width
    b.page.get_by_role("link", name="Trace of this session").click()
    expect(b.page.locator("section.turn")).to_have_count(1)
    assert b.page.evaluate("document.documentElement.scrollWidth") <= 390
    b.shot("narrow-trace")
    b.page.get_by_role("link", name="Agents", exact=True).click()
    expect(b.page.get_by_role("link", name="Narrow", exact=True)).to_be_visible()
    assert b.page.evaluate("document.documentElement.scrollWidth") <= 390
    b.shot("narrow-agents")


# --- trace and time travel ------------------------------------------------------------------------------
def test_the_trace_shows_every_step_and_a_fork_with_an_edited_input_streams_a_new_answer(browsing, ui_server, alice_token):
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(CHAT_DSL, "Traced")
    first = alice.stream("/agents/chat/completions", {"agent_id": agent_id, "query": "first question", "stream": True})
    session_id = first[0]["session_id"]
    alice.stream("/agents/chat/completions", {"agent_id": agent_id, "session_id": session_id, "query": "second question",
                                              "stream": True})
    b = browsing()
    b.sign_in(alice_token)
    open_agent(b, "Traced")
    b.page.locator(f'a[data-session-id="{session_id}"]').click()
    b.page.get_by_role("link", name="Trace of this session").click()
    turns = b.page.locator("section.turn")
    expect(turns).to_have_count(2)
    expect(turns.nth(0)).to_contain_text("first question")
    first_turn = turns.nth(0)
    expect(first_turn.locator("details.step")).to_have_count(3)
    llm = first_turn.locator('details.step[data-component="LLM:A"]')
    llm.locator("summary").click()
    expect(llm).to_contain_text("Messages sent to the model")
    expect(llm.locator(".model-messages")).to_contain_text("first question")
    expect(llm).to_contain_text("total_tokens")
    expect(llm).to_contain_text("Answer 1 from LLM:A.")
    b.shot("trace")

    # run turn 1 again from Message:M with an edited input: the new branch streams its own answer
    message = first_turn.locator('details.step[data-component="Message:M"]')
    message.locator("summary").click()
    message.get_by_role("button", name="Run again from here").click()
    inputs = b.page.get_by_label("Inputs (JSON)")
    edited = json.loads(inputs.input_value())
    assert edited["sys.query"] == "first question"
    edited["sys.query"] = "an <b>edited</b> question"
    inputs.fill(json.dumps(edited))
    b.page.get_by_role("button", name="Run the new branch").click()
    branch = b.page.get_by_role("list", name="The new branch")
    expect(branch).to_contain_text("You said:an <b>edited</b> question")
    expect(b.page.locator("section.fork")).to_contain_text("The new branch finished.")
    expect(component(b, "Message:M")).to_have_attribute("data-state", "done")
    assert b.page.locator("main b").count() == 0
    b.shot("fork")
    # the original branch stays: the chat shows the fork as version 2 of turn 1, and version 1 has its first answer
    b.page.get_by_role("link", name="Back to the chat").click()
    versions = b.page.get_by_role("group", name="Versions of turn 1")
    expect(versions).to_contain_text("2/2")
    expect(b.page.locator(".message.assistant").first).to_contain_text("You said:an <b>edited</b> question")
    versions.get_by_role("button", name="Previous version of turn 1").click()
    expect(b.page.locator(".message.assistant").first).to_contain_text("You said:first question")
    assert b.errors == []


# --- the README's setup -----------------------------------------------------------------------------------
def test_the_readme_setup_gives_a_tenant_the_demo_agent_to_run_in_the_browser(browser, tmp_path):
    from tests.server.helpers import Server
    from tests.server.ui.conftest import Browsing
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", readme[readme.index("**Web UI: canvas editor and run view.**"):], re.S).group(1)
    setup, serve = block.strip().splitlines()
    # a server unless one answers already (the README's HTTP example may still run one)
    assert serve.startswith("curl -sf localhost:9380/health >/dev/null || .venv/bin/canvas2graph serve --llm-script ")
    db = tmp_path / "sessions.db"
    env = {"PATH": f"{REPO / '.venv' / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "CANVAS2GRAPH_DB": str(db),
           "PYTHONPATH": str(REPO)}
    done = subprocess.run(["bash", "-c", setup.replace(".venv/bin/canvas2graph", CLI_LINE)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    script = json.loads((REPO / serve.split("--llm-script ", 1)[1].strip()).read_text())
    with Server(str(db), tmp_path, script) as server:       # `serve` as the README's, on a free port
        b = Browsing(browser, server, "readme")
        try:
            b.sign_in(token)
            open_agent(b, "Support desk")
            send(b, "Why was I charged twice this month?")
            expect(b.page.locator(".message.assistant").last).to_contain_text("Desk: (billing)")
            expect(component(b, "LLM:Billing")).to_have_attribute("data-state", "done")
            b.shot("demo")
        finally:
            b.context.close()
