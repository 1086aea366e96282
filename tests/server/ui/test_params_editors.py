"""The params forms of the canvas editor, on the support desk agent (fixtures/ui/support_router.json), in
Debian's Chromium against a real `canvas2graph serve`: references are inserted from a picker of what is in
scope at the component (typing `/` or `{`), shown as chips and saved as RAGFlow saves them; an LLM's
messages, a Categorize's categories, a Switch's cases and a Loop's variables are rows, not JSON; a new LLM
starts with RAGFlow's sampling values; the model is picked from the server's models."""
from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from tests.server.helpers import REPO, Api, cpn
from tests.server.ui.test_editor import fresh_editor, node, press, save_version
from tests.server.ui.test_routing import open_editor

ROUTER = json.loads((REPO / "fixtures/ui/support_router.json").read_text())


def pick(b, cid: str):
    """Select a component from the inspector's list (the keyboard's way); returns its params form."""
    close = b.page.locator(".inspector").get_by_role("button", name="Close", exact=True)
    if close.count():
        close.click()
    b.page.locator(".component-picker").get_by_role("button", name=cid, exact=True).click()
    expect(b.page.get_by_role("heading", name=cid, exact=True)).to_be_visible()
    return b.page.get_by_role("form", name=f"Params of {cid}")


def edit_support_desk(browsing, ui_server, token: str, title: str, cid: str):
    """The support desk saved as a new agent, opened in the editor with `cid` selected: (browser, api, agent id, form)."""
    alice = Api(ui_server, token)
    agent_id = alice.agent(ROUTER, title)
    b = open_editor(browsing, token, agent_id)
    return b, alice, agent_id, pick(b, cid)


def saved(b, alice: Api, agent_id: str) -> dict:
    save_version(b)
    return alice.ok("GET", f"/agents/{agent_id}")["dsl"]


def test_an_llm_s_messages_are_rows_and_slash_offers_what_is_upstream_which_a_chip_shows_and_the_dsl_saves_braced(
        browsing, ui_server, alice_token):
    b, alice, agent_id, form = edit_support_desk(browsing, ui_server, alice_token, "Support desk", "LLM:Refund")
    prompts = form.locator('[data-field="params.prompts"]')
    # a list of messages, each a role and its content; no JSON anywhere in the form's prompts
    expect(prompts.locator(".prompt-row")).to_have_count(1)
    expect(prompts.locator("textarea")).to_have_count(0)
    expect(form.locator(":not(.advanced) > .param-field textarea[placeholder=JSON]")).to_have_count(0)
    expect(prompts.get_by_label("Role of message 1")).to_have_value("user")
    content = prompts.get_by_role("textbox", name="Content of message 1")
    # the fixture's LLM has no sampling values: each switch is off, and one turned on starts from RAGFlow's value
    sampling = form.locator(".sampling-field")
    expect(sampling.get_by_label("Send top p")).not_to_be_checked()
    sampling.get_by_label("Send top p").check()
    expect(sampling.get_by_role("spinbutton", name="Top p")).to_have_value("0.3")
    # the reference typed by hand in the DSL loads as a chip naming the component and its output
    expect(content.locator('.ref-chip[data-ref="LLM:Billing@content"]')).to_have_text("LLM:Billing › content")
    content.click()
    b.page.keyboard.press("Control+End")
    b.page.keyboard.type(" /")
    picker = b.page.get_by_role("listbox", name="References in scope")
    expect(picker).to_be_visible()
    # what is upstream of LLM:Refund (transitively), Begin and the system variables; not itself, not a sibling branch
    offered = picker.get_by_role("option")
    for name in ("LLM:Billing › content, string", "Categorize:Triage › category_name, string", "sys.query, string",
                 "sys.conversation_turns, number", "sys.files, Array<File>", "Switch:Amount › next, string"):
        expect(picker.get_by_role("option", name=name, exact=True)).to_have_count(1)
    texts = offered.all_inner_texts()
    assert not any("LLM:Legal" in t or "LLM:Refund" in t or "Message:" in t for t in texts), texts
    b.shot("prompt-picker")
    # typing filters; arrow keys move, Enter chooses: the chip replaces what was typed
    b.page.keyboard.type("que")
    expect(offered).to_have_count(1)
    expect(offered.first).to_have_attribute("aria-selected", "true")
    b.page.keyboard.press("Enter")
    expect(picker).to_have_count(0)
    expect(content.locator('.ref-chip[data-ref="sys.query"]')).to_have_text("sys.query")
    # `{` opens it too; Escape closes it and leaves what was typed
    b.page.keyboard.type(" {")
    expect(picker).to_be_visible()
    b.page.keyboard.press("ArrowDown")
    expect(offered.nth(1)).to_have_attribute("aria-selected", "true")
    b.page.keyboard.press("Escape")
    expect(picker).to_have_count(0)
    expect(b.page.get_by_role("heading", name="LLM:Refund", exact=True)).to_be_visible()     # Escape closed only the picker
    expect(content).to_contain_text("{")
    # the editor's own undo: the "{" and then the chip go; redo brings the chip back
    b.page.keyboard.press("Control+z")
    expect(content).not_to_contain_text("{")
    b.page.keyboard.press("Control+z")
    expect(content.locator('.ref-chip[data-ref="sys.query"]')).to_have_count(0)
    b.page.keyboard.press("Control+Shift+z")
    expect(content.locator('.ref-chip[data-ref="sys.query"]')).to_have_count(1)
    # a click on an option chooses it; a second message is added with its role
    b.page.keyboard.type(" /")
    picker.get_by_role("option", name="Categorize:Triage › category_name, string", exact=True).click()
    prompts.get_by_role("button", name="Add a message").click()
    expect(prompts.get_by_label("Role of message 2")).to_have_value("assistant")
    prompts.get_by_label("Role of message 2").select_option("user")
    prompts.get_by_role("textbox", name="Content of message 2").click()
    b.page.keyboard.type("Reply in the customer's language.")
    prompts.get_by_role("button", name="Move message 2 up").click()
    b.shot("prompt-rows")
    dsl = saved(b, alice, agent_id)
    params = dsl["components"]["LLM:Refund"]["obj"]["params"]
    assert params["prompts"] == [
        {"role": "user", "content": "Reply in the customer's language."},
        {"role": "user", "content": "Explain the refund steps for: {LLM:Billing@content} {sys.query} {Categorize:Triage@category_name}"}]
    assert next(n for n in dsl["graph"]["nodes"] if n["id"] == "LLM:Refund")["data"]["form"]["prompts"] == params["prompts"]
    assert params["topPEnabled"] is True and params["top_p"] == 0.3 and "temperature" not in params
    assert b.errors == []


def test_a_message_s_replies_a_fillup_s_tips_and_the_system_prompt_take_references_and_paste_is_plain_text(
        browsing, ui_server, alice_token):
    b, alice, agent_id, form = edit_support_desk(browsing, ui_server, alice_token, "Support desk replies", "Message:Sales")
    reply = form.get_by_role("textbox", name="Reply 1")
    expect(reply.locator(".ref-chip")).to_have_text(["LLM:Sales › content", "UserFillUp:Contact › email"])
    # pasted text stays text; a reference in it becomes a chip
    reply.click()
    b.page.keyboard.press("Control+End")
    reply.evaluate("""el => { const data = new DataTransfer(); data.setData('text/plain', ' Ref: {sys.user_id}');
        data.setData('text/html', '<b>bold</b>'); el.dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true})); }""")
    expect(reply.locator('.ref-chip[data-ref="sys.user_id"]')).to_have_count(1)
    expect(reply.locator("b")).to_have_count(0)
    form.get_by_role("button", name="Add reply").click()
    form.get_by_role("textbox", name="Reply 2").click()
    b.page.keyboard.type("Thanks, we will write to {UserFillUp:Contact@email}.")           # typed in full: a chip too
    expect(form.get_by_role("textbox", name="Reply 2").locator(".ref-chip")).to_have_text(["UserFillUp:Contact › email"])
    # Backspace takes the "." and then the whole chip
    b.page.keyboard.press("Backspace")
    b.page.keyboard.press("Backspace")
    expect(form.get_by_role("textbox", name="Reply 2").locator(".ref-chip")).to_have_count(0)
    b.page.keyboard.type("{UserFillUp:Contact@email}.")
    # the arrow keys step over a chip in one press
    b.page.keyboard.press("ArrowLeft")
    b.page.keyboard.press("ArrowLeft")
    b.page.keyboard.type("you at ")
    b.shot("message-replies")
    # the UserFillUp's tips: its own form fields are not offered to itself, the LLM before it is
    form = pick(b, "UserFillUp:Contact")
    tips = form.get_by_role("textbox", name="tips")
    tips.click()
    b.page.keyboard.press("Control+End")
    b.page.keyboard.type(" /")
    picker = b.page.get_by_role("listbox", name="References in scope")
    expect(picker.get_by_role("option", name="LLM:Sales › content, string", exact=True)).to_have_count(1)
    expect(picker.get_by_role("option", name="UserFillUp:Contact › email, string", exact=True)).to_have_count(0)
    b.page.keyboard.press("Escape")
    b.page.keyboard.press("Backspace")
    b.page.keyboard.press("Backspace")
    # a Categorize's query holds one reference: a list of what is in scope, saved bare as RAGFlow saves it
    form = pick(b, "Categorize:Severity")
    query = form.get_by_label("query")
    expect(query).to_have_value("LLM:Tech@content")
    query.select_option("sys.query")
    dsl = saved(b, alice, agent_id)
    components = dsl["components"]
    assert components["Message:Sales"]["obj"]["params"]["content"] == [
        "{LLM:Sales@content} We will write to {UserFillUp:Contact@email}. Ref: {sys.user_id}",
        "Thanks, we will write to you at {UserFillUp:Contact@email}."]
    assert components["UserFillUp:Contact"]["obj"]["params"]["tips"] == ROUTER["components"]["UserFillUp:Contact"]["obj"]["params"]["tips"]
    assert components["Categorize:Severity"]["obj"]["params"]["query"] == "sys.query"
    assert b.errors == []


def test_categories_are_rows_whose_targets_are_chosen_from_a_list_and_the_routes_follow(browsing, ui_server, alice_token):
    b, alice, agent_id, form = edit_support_desk(browsing, ui_server, alice_token, "Support desk categories", "Categorize:Triage")
    cats = form.locator('[data-field="params.category_description"]')
    expect(cats.locator(".category-row")).to_have_count(5)
    legal = cats.locator('.category-row[data-category="legal"]')
    expect(legal.get_by_label("Name")).to_have_value("legal")
    expect(legal.get_by_label("Description")).to_have_value("Contracts, terms, data requests")
    expect(legal.get_by_label("Examples (one per line)")).to_have_value("Send me my data")
    expect(legal.locator(".target-chip")).to_have_text(["LLM:Legal✕"])
    # a new category: named, described, with examples, routed to a component chosen from the list
    cats.get_by_role("button", name="Add a category").click()
    new = cats.locator(".category-row").nth(5)
    new.get_by_label("Name").fill("refunds")
    new.get_by_label("Description").fill("Money back")
    new.get_by_label("Examples (one per line)").fill("I want my money back\nRefund please")
    new.get_by_label("Category refunds goes to").select_option("LLM:Refund")
    expect(node(b, "Categorize:Triage").locator(".node-route")).to_have_text(["billing", "legal", "technical", "sales", "smalltalk", "refunds"])
    # renaming keeps the route; a name another category has is refused, not merged
    small = cats.locator('.category-row[data-category="smalltalk"]')
    small.get_by_label("Name").fill("billing")
    expect(small.locator(".field-error")).to_have_text('Another category is named "billing".')
    small.get_by_label("Name").fill("chitchat")
    expect(cats.locator(".category-row")).to_have_count(6)
    new.scroll_into_view_if_needed()
    # the canvas draws the routes from the new and the renamed category's handles
    expect(b.page.locator('.editor-canvas .react-flow__edge[data-id="Categorize:Triage[chitchat]->Message:Hello"]')).to_have_count(1)
    expect(b.page.locator('.editor-canvas .react-flow__edge[data-id="Categorize:Triage[refunds]->LLM:Refund"]')).to_have_count(1)
    b.shot("categories", full_page=False)
    expect(b.page.locator(".check-state")).to_have_text("Compiles")
    dsl = saved(b, alice, agent_id)
    triage = dsl["components"]["Categorize:Triage"]
    cats_saved = triage["obj"]["params"]["category_description"]
    assert list(cats_saved) == ["billing", "legal", "technical", "sales", "chitchat", "refunds"]
    assert cats_saved["refunds"] == {"description": "Money back", "examples": ["I want my money back", "Refund please"], "to": ["LLM:Refund"]}
    assert cats_saved["chitchat"]["to"] == ["Message:Hello"] and cats_saved["legal"] == ROUTER["components"]["Categorize:Triage"]["obj"]["params"]["category_description"]["legal"]
    assert "LLM:Refund" in triage["downstream"] and "Categorize:Triage" in dsl["components"]["LLM:Refund"]["upstream"]
    items = {i["name"]: i["uuid"] for i in next(n for n in dsl["graph"]["nodes"] if n["id"] == "Categorize:Triage")["data"]["form"]["items"]}
    assert set(items) == set(cats_saved)
    assert {(e["sourceHandle"], e["target"]) for e in dsl["graph"]["edges"] if e["source"] == "Categorize:Triage"} == {
        (items[name], to) for name, d in cats_saved.items() for to in d["to"]}
    assert b.errors == []


def test_switch_cases_are_built_from_reference_operator_and_value_rows_and_their_targets_route(browsing, ui_server, alice_token):
    b, alice, agent_id, form = edit_support_desk(browsing, ui_server, alice_token, "Support desk switch", "Switch:Amount")
    cases = form.locator(".case-row")
    expect(cases).to_have_count(2)
    expect(form.get_by_label("Case 1, condition 1: reference")).to_have_value("LLM:Billing@content")
    expect(form.get_by_label("Case 1, condition 1: operator")).to_have_value("contains")
    expect(form.get_by_label("Case 1, condition 1: value")).to_have_value("refund")
    expect(form.get_by_label("Case 2: joins its conditions by")).to_have_value("or")
    # RAGFlow's operator set
    assert form.get_by_label("Case 1, condition 1: operator").locator("option").evaluate_all("os => os.map(o => o.value)") == [
        "=", "≠", ">", "≥", "<", "≤", "contains", "not contains", "start with", "end with", "empty", "not empty", "in", "not in"]
    # a second condition on case 1: a reference chosen from what is in scope; "is not empty" takes no value
    form.get_by_role("button", name="Add a condition to case 1").click()
    form.get_by_label("Case 1, condition 2: reference").select_option("sys.query")
    form.get_by_label("Case 1, condition 2: operator").select_option("not empty")
    expect(form.get_by_label("Case 1, condition 2: value")).to_have_count(0)
    form.get_by_label("Case 2, condition 2: operator").select_option("start with")
    # a third case routed to Message:Hello; the else also goes to Message:Dispute
    form.get_by_role("button", name="Add a case").click()
    form.get_by_label("Case 3, condition 1: reference").select_option("Categorize:Triage@category_name")
    form.get_by_label("Case 3, condition 1: value").fill("sales")
    form.get_by_label("Case 3 goes to").select_option("Message:Hello")
    form.get_by_label("Else goes to: add a target").select_option("Message:Dispute")
    expect(node(b, "Switch:Amount").locator(".node-route")).to_have_text(["Case 1", "Case 2", "Case 3", "Else"])
    expect(b.page.locator('.editor-canvas .react-flow__edge[data-id="Switch:Amount[Case 3]->Message:Hello"]')).to_have_count(1)
    b.shot("switch-cases")
    expect(b.page.locator(".check-state")).to_have_text("Compiles")
    dsl = saved(b, alice, agent_id)
    switch = dsl["components"]["Switch:Amount"]
    conditions = switch["obj"]["params"]["conditions"]
    assert conditions[0]["items"][1] == {"cpn_id": "sys.query", "operator": "not empty", "value": ""}
    assert conditions[1]["items"][1]["operator"] == "start with" and conditions[1]["to"] == ["Message:Dispute"]
    assert conditions[2] == {"logical_operator": "and", "items": [{"cpn_id": "Categorize:Triage@category_name", "operator": "=", "value": "sales"}],
                             "to": ["Message:Hello"]}
    assert switch["obj"]["params"]["end_cpn_ids"] == ["Message:Billing", "Message:Dispute"]
    assert set(switch["downstream"]) == {"LLM:Refund", "Message:Dispute", "Message:Billing", "Message:Hello"}
    edges = {(e["sourceHandle"], e["target"]) for e in dsl["graph"]["edges"] if e["source"] == "Switch:Amount"}
    assert ("Case 3", "Message:Hello") in edges and ("end_cpn_ids", "Message:Dispute") in edges
    assert b.errors == []


def test_a_new_llm_starts_with_ragflow_s_sampling_values_never_zeros_and_its_model_is_picked_from_the_server_s(
        browsing, ui_server, alice_token):
    Api(ui_server, alice_token).agent(ROUTER, "Support desk models")          # names gpt-4o@OpenAI
    b = fresh_editor(browsing, alice_token)
    b.page.get_by_label("Title").fill("Sampling")
    b.page.get_by_label("Component", exact=True).select_option("LLM")
    press(b, "Add component")
    form = b.page.get_by_role("form", name="Params of LLM:1")
    sampling = form.locator(".sampling-field")
    expect(sampling.get_by_label("Send temperature")).to_be_checked()
    expect(sampling.get_by_role("spinbutton", name="Temperature")).to_have_value("0.1")
    expect(sampling.get_by_role("spinbutton", name="Top p")).to_have_value("0.3")
    expect(sampling.get_by_label("Send most tokens")).not_to_be_checked()
    expect(sampling.get_by_role("spinbutton", name="Most tokens")).to_be_disabled()
    # the model: what the server runs (its script), what the tenant's agents use; any model@Factory still goes
    model = form.get_by_label("llm_id")
    offered = form.locator(f"datalist#{model.get_attribute('list')} option").evaluate_all("os => os.map(o => o.value)")
    assert "scripted@LLMScript" in offered and "gpt-4o@OpenAI" in offered, offered
    expect(form.locator(".model-hint")).to_contain_text("Empty")
    model.fill("my-model@Acme")
    expect(form.locator(".model-hint")).to_have_count(0)            # the script answers any model on this server
    model.fill("gpt-4o@OpenAI")
    sampling.get_by_role("spinbutton", name="Temperature").fill("0.5")
    sampling.get_by_label("Send top p").uncheck()
    sampling.scroll_into_view_if_needed()
    b.shot("new-llm-sampling", full_page=False)
    press(b, "Save agent")
    expect(b.page.get_by_role("heading", level=1, name="Sampling")).to_be_visible()
    agent_id = b.page.url.split("#/agents/")[1].split("/")[0]
    params = Api(ui_server, alice_token).ok("GET", f"/agents/{agent_id}")["dsl"]["components"]["LLM:1"]["obj"]["params"]
    assert {k: params[k] for k in ("temperature", "top_p", "presence_penalty", "frequency_penalty", "max_tokens")} == {
        "temperature": 0.5, "top_p": 0.3, "presence_penalty": 0.4, "frequency_penalty": 0.7, "max_tokens": 256}
    assert params["temperatureEnabled"] and not params["topPEnabled"] and params["presencePenaltyEnabled"] and not params["maxTokensEnabled"]
    assert params["llm_id"] == "gpt-4o@OpenAI" and params["prompts"] == [{"role": "user", "content": "{sys.query}"}]
    assert b.errors == []


def test_a_loop_s_variables_and_its_stop_condition_are_rows_and_its_body_can_reference_them(browsing, ui_server, alice_token):
    b = fresh_editor(browsing, alice_token)
    b.page.get_by_label("Component", exact=True).select_option("Loop")
    press(b, "Add component")
    form = b.page.get_by_role("form", name="Params of Loop:1")
    variables = form.locator('[data-field="params.loop_variables"]')
    variables.get_by_role("button", name="Add a variable").click()
    variables.get_by_label("Name").fill("count")
    variables.get_by_label("Type").select_option("number")
    variables.get_by_label("Value").fill("3")
    stop = form.locator('[data-field="params.loop_termination_condition"]')
    stop.get_by_role("button", name="Add a condition to stop").click()
    stop.get_by_label("Stop, condition 1: reference").select_option("Loop:1@count")
    stop.get_by_label("Stop, condition 1: operator").select_option("≤")
    stop.get_by_label("Stop, condition 1: value").fill("0")
    b.shot("loop-rows")
    # a component inside the Loop is offered its variables
    b.page.get_by_label("Component", exact=True).select_option("Message")
    press(b, "Add component")
    reply = b.page.get_by_role("form", name="Params of Message:1").get_by_role("textbox", name="Reply 1")
    reply.click()
    b.page.keyboard.type("/")
    # (the chip and the option show the Loop's name on the canvas, whatever it is)
    expect(b.page.get_by_role("listbox", name="References in scope").get_by_role("option", name=re.compile(r" › count, number$"))).to_have_count(1)
    b.page.keyboard.press("Enter")
    expect(reply.locator('.ref-chip[data-ref="Loop:1@count"]')).to_have_count(1)
    loop = pick(b, "Loop:1")
    expect(loop.get_by_label("Stop, condition 1: reference")).to_have_value("Loop:1@count")
    assert b.errors == []


def test_inside_an_iteration_the_picker_offers_its_item_and_index_begin_s_inputs_and_the_conversation_variables(
        browsing, ui_server, alice_token):
    inside = {"parent_id": "Iteration:Each"}
    dsl = {"components": {
        "begin": cpn("Begin", {"prologue": "Hi.", "inputs": {"topic": {"type": "line", "name": "Topic"},
                                                           "count": {"type": "integer", "name": "Count"}}}, ["LLM:List"]),
        "LLM:List": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "List {begin@topic}"}]}, ["Iteration:Each"]),
        "Iteration:Each": cpn("Iteration", {"items_ref": "LLM:List@structured"}, ["Message:Done"]),
        "IterationItem:Start": {**cpn("IterationItem", {}, ["Message:Each"]), **inside},
        "Message:Each": {**cpn("Message", {"content": ["One: {IterationItem:Start@item}"]}), **inside},
        "Message:Done": cpn("Message", {"content": ["Done."]}),
    }, "variables": {"tone": {"name": "tone", "type": "string", "value": "warm", "description": ""}},
        "globals": {"env.tone": "warm", "sys.query": ""}}
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(dsl, "Each item")
    b = open_editor(browsing, alice_token, agent_id)
    # the Iteration's items: one reference, chosen from what is upstream of it
    form = pick(b, "Iteration:Each")
    items = form.get_by_label("items_ref")
    expect(items).to_have_value("LLM:List@structured")
    offered = items.locator("option").evaluate_all("os => os.map(o => o.value)")
    assert {"LLM:List@content", "begin@topic", "begin@count", "sys.files", "env.tone"} <= set(offered), offered
    assert not any(o.startswith(("Message:", "IterationItem:")) for o in offered), offered
    # a component inside it: the item and its index, what the Iteration reaches, Begin's inputs, env variables
    form = pick(b, "Message:Each")
    reply = form.get_by_role("textbox", name="Reply 1")
    expect(reply.locator(".ref-chip")).to_have_text(["IterationItem:Start › item"])
    reply.click()
    b.page.keyboard.press("Control+End")
    b.page.keyboard.type(" /")
    picker = b.page.get_by_role("listbox", name="References in scope")
    for name in ("Begin › topic, string", "Begin › count, number", "IterationItem:Start › item, any", "IterationItem:Start › index, number",
                 "LLM:List › content, string", "env.tone, string"):
        expect(picker.get_by_role("option", name=name, exact=True)).to_have_count(1)
    expect(picker.get_by_role("option", name="Message:Done", exact=False)).to_have_count(0)
    b.page.keyboard.type("tone")
    b.page.keyboard.press("Enter")
    b.shot("iteration-scope")
    params = saved(b, alice, agent_id)["components"]["Message:Each"]["obj"]["params"]
    assert params["content"] == ["One: {IterationItem:Start@item} {env.tone}"]
    assert b.errors == []


def test_a_retrieval_s_query_is_text_with_references_and_its_bare_reference_reads_as_a_chip(browsing, ui_server, alice_token):
    """RAGFlow edits a Retrieval's query with its prompt editor (the engine formats it), and saves a new
    one as the bare `sys.query`, which the engine reads as that reference."""
    dsl = {"components": {
        "begin": cpn("Begin", {"prologue": "Hi."}, ["LLM:Rewrite"]),
        "LLM:Rewrite": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [{"role": "user", "content": "Rewrite {sys.query}"}]}, ["Retrieval:Docs"]),
        "Retrieval:Docs": cpn("Retrieval", {"query": "sys.query", "kb_ids": ["kb1"]}, ["Message:Out"]),
        "Message:Out": cpn("Message", {"content": ["{Retrieval:Docs@formalized_content}"]}),
    }}
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(dsl, "Search")
    b = open_editor(browsing, alice_token, agent_id)
    query = pick(b, "Retrieval:Docs").get_by_role("textbox", name="query")
    expect(query.locator(".ref-chip")).to_have_text(["sys.query"])
    query.click()
    b.page.keyboard.press("Control+End")
    b.page.keyboard.type(" or /rew")
    b.page.keyboard.press("Enter")
    expect(query.locator(".ref-chip")).to_have_text(["sys.query", "LLM:Rewrite › content"])
    params = saved(b, alice, agent_id)["components"]["Retrieval:Docs"]["obj"]["params"]
    assert params["query"] == "{sys.query} or {LLM:Rewrite@content}"
    assert b.errors == []


def test_code_arguments_assignments_and_aggregated_groups_are_rows_of_references(browsing, ui_server, alice_token):
    dsl = {"components": {
        "begin": cpn("Begin", {"prologue": "Hi.", "inputs": {"amount": {"type": "integer", "name": "Amount"}}}, ["CodeExec:Calc"]),
        "CodeExec:Calc": cpn("CodeExec", {"lang": "python", "script": "def main(x):\n    return {'result': x}",
                                          "arguments": {"x": "begin@amount"}}, ["VariableAssigner:Keep"]),
        "VariableAssigner:Keep": cpn("VariableAssigner", {"variables": [
            {"variable": "env.total", "operator": "overwrite", "parameter": "CodeExec:Calc@result"}]}, ["VariableAggregator:Join"]),
        "VariableAggregator:Join": cpn("VariableAggregator", {"groups": [
            {"group_name": "answer", "type": "string", "variables": [{"value": "CodeExec:Calc@result"}]}]}, ["Message:Out"]),
        "Message:Out": cpn("Message", {"content": ["{VariableAggregator:Join@answer}"]}),
    }, "variables": {"total": {"name": "total", "type": "number", "value": 0, "description": ""}}, "globals": {"env.total": 0}}
    alice = Api(ui_server, alice_token)
    agent_id = alice.agent(dsl, "Rows of references")
    b = open_editor(browsing, alice_token, agent_id)
    form = pick(b, "CodeExec:Calc")
    expect(form.get_by_label("Argument 1: name")).to_have_value("x")
    expect(form.get_by_label("Argument 1: reference")).to_have_value("begin@amount")
    expect(form.locator('[data-field="params.script"] textarea')).to_have_count(1)       # code stays a plain text area
    expect(form.locator('[data-field="params.script"] .ref-text')).to_have_count(0)
    form.get_by_role("button", name="Add an argument").click()
    form.get_by_label("Argument 2: name").fill("turns")
    form.get_by_label("Argument 2: reference").select_option("sys.conversation_turns")
    form = pick(b, "VariableAssigner:Keep")
    expect(form.get_by_label("Assignment 1: variable")).to_have_value("env.total")
    expect(form.get_by_label("Assignment 1: with")).to_have_value("CodeExec:Calc@result")
    form.get_by_role("button", name="Add an assignment").click()
    form.get_by_label("Assignment 2: variable").select_option("env.total")
    form.get_by_label("Assignment 2: operation").select_option("+=")
    form.get_by_role("textbox", name="Assignment 2: with").click()
    b.page.keyboard.type("1")
    form = pick(b, "VariableAggregator:Join")
    form.get_by_role("button", name="Add a variable to group 1").click()
    form.get_by_label("Group 1, variable 2", exact=True).select_option("begin@amount")
    b.shot("reference-rows", full_page=False)
    # the group's name is an output the Message can reference
    form = pick(b, "Message:Out")
    expect(form.get_by_role("textbox", name="Reply 1").locator(".ref-chip")).to_have_class(re.compile(r"^ref-chip$"))
    components = saved(b, alice, agent_id)["components"]
    assert components["CodeExec:Calc"]["obj"]["params"]["arguments"] == {"x": "begin@amount", "turns": "sys.conversation_turns"}
    assert components["VariableAssigner:Keep"]["obj"]["params"]["variables"][1] == {"variable": "env.total", "operator": "+=", "parameter": "1"}
    assert components["VariableAggregator:Join"]["obj"]["params"]["groups"][0]["variables"] == [
        {"value": "CodeExec:Calc@result"}, {"value": "begin@amount"}]
    assert b.errors == []
