"""The browsing loop: the model reads the page and picks one action at a time, until it calls `done`.

Each step is one model call with the actions bound as tools (native tool calling, as the Agent
component uses); the result of every action comes back with the page as it now is. Only the latest
page is kept in full: earlier tool results keep the action's outcome, so a long session does not
fill the model's context. A reply without a tool call is taken as the final answer. When `max_steps`
calls have passed without one, the answer is empty, as RAGFlow's browser-use agent leaves it.
"""
from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from canvas2graph.nodes.browser.session import BrowserSession
from canvas2graph.runtime.services import model_calls

SYSTEM = """\
You operate a web browser to complete the user's task. After every action you are shown the page: its
URL, title, the elements you can act on (numbered [0], [1], ...) and its visible text.

Work one step at a time: call exactly one browser action per turn, using the element numbers of the
latest page. Open pages with go_to_url; follow links and press buttons with click_element; fill in
fields with input_text; pick from drop-down lists with select_option. When the task is complete, or
cannot be completed, call done with the answer for the user: the facts you found, in full, with their
source URLs. Do not make anything up that the pages did not show."""

ACTIONS: list[dict[str, Any]] = [
    {"name": "go_to_url", "description": "Open a URL in the current tab.",
     "parameters": {"type": "object", "properties": {
         "url": {"type": "string", "description": "The full http:// or https:// URL."}}, "required": ["url"]}},
    {"name": "click_element", "description": "Click an element (a link, a button) by its number.",
     "parameters": {"type": "object", "properties": {
         "index": {"type": "integer", "description": "The element's number in the latest page."}}, "required": ["index"]}},
    {"name": "input_text", "description": "Type text into a field, replacing what it holds.",
     "parameters": {"type": "object", "properties": {
         "index": {"type": "integer", "description": "The field's number in the latest page."},
         "text": {"type": "string", "description": "The text to type."},
         "press_enter": {"type": "boolean", "description": "Press Enter afterwards (submits most forms)."}},
         "required": ["index", "text"]}},
    {"name": "select_option", "description": "Choose an option of a drop-down list by its visible text.",
     "parameters": {"type": "object", "properties": {
         "index": {"type": "integer", "description": "The list's number in the latest page."},
         "value": {"type": "string", "description": "The option's text."}}, "required": ["index", "value"]}},
    {"name": "upload_file", "description": "Choose one of the offered local files in a file field.",
     "parameters": {"type": "object", "properties": {
         "index": {"type": "integer", "description": "The file field's number."},
         "path": {"type": "string", "description": "One of the local paths offered in the task."}},
         "required": ["index", "path"]}},
    {"name": "scroll", "description": "Scroll the page.",
     "parameters": {"type": "object", "properties": {
         "direction": {"type": "string", "enum": ["down", "up"], "description": "down (default) or up."}}}},
    {"name": "go_back", "description": "Go back to the previous page.",
     "parameters": {"type": "object", "properties": {}}},
    {"name": "done", "description": "Finish: give the final answer for the user.",
     "parameters": {"type": "object", "properties": {
         "text": {"type": "string", "description": "The complete answer, with the source URLs."},
         "success": {"type": "boolean", "description": "Whether the task was completed."}}, "required": ["text"]}},
]
TOOLS = [{"type": "function", "function": spec} for spec in ACTIONS]
PAGE_MARK = "\n\nThe browser shows:\n"
ACTION_NAMES = {spec["name"] for spec in ACTIONS}


async def browse(model, session: BrowserSession, task: str, max_steps: int, *, sys_prompt: str = "") -> str:
    """Run the loop; returns the final answer ("" when the steps ran out)."""
    bound = model.bind_tools(TOOLS)
    system = SYSTEM + (f"\n\n{sys_prompt.strip()}" if sys_prompt and sys_prompt.strip() else "")
    page = await session.describe()
    history: list = [SystemMessage(system), HumanMessage(f"Task:\n{task}{PAGE_MARK}{page}")]
    latest: ToolMessage | None = None
    for _ in range(max_steps):
        reply: AIMessage = await model_calls.invoke(bound, history)
        history.append(reply)
        if not reply.tool_calls:
            return _text(reply.content)
        for call in reply.tool_calls:
            name, args = call["name"], call.get("args") or {}
            if name == "done":
                return str(args.get("text", "")).strip()
            outcome = (await session.act(name, args) if name in ACTION_NAMES
                       else f"{name} is not a browser action; use one of: {', '.join(sorted(ACTION_NAMES))}")
            if latest is not None:          # the previous page is history now: keep its outcome only
                at = history.index(latest)
                history[at] = ToolMessage(latest.content.split(PAGE_MARK, 1)[0], tool_call_id=latest.tool_call_id)
            latest = ToolMessage(f"{outcome}{PAGE_MARK}{await session.describe()}", tool_call_id=call["id"])
            history.append(latest)
    return ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content).strip()
    return json.dumps(content, ensure_ascii=False)
