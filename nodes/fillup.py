"""UserFillUp ("Await response"): pause the turn until the user fills a form (SPEC 3.2, 5.5).

The node computes its tips, then calls LangGraph's `interrupt()` with the form. The turn ends
with a `user_inputs` event; the next request on the session resumes here with `Command(resume=
{field: value})` (the Runner sends `resume_value(inputs, query)`), and LangGraph re-runs this node from
the top, so nothing before the pause runs twice.
"""
from __future__ import annotations

import json
from typing import Any

from canvas2graph.nodes.base import Node, Result, settle_pending
from canvas2graph.nodes.begin import BeginParams, ask, field_value, is_file_field, missing_fields, read_files  # noqa: F401 (missing_fields: the Runner's)
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.graph.state import with_update
from canvas2graph.runtime.graph.values import render


class UserFillUpParams(BeginParams):
    mode: str = "conversational"        # inherited from Begin's params; unused here


def tips_text(value: Any) -> str:
    """Tips print lists joined with ',' and other non-strings as JSON (SPEC 3.2)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False)


def pending_form(form: dict[str, dict]) -> dict[str, dict]:
    return {key: {**field, "value": None} for key, field in form.items()}


@register("UserFillUp", UserFillUpParams, outputs=lambda p: {"tips"} | set(p.form()))
class UserFillUp(Node):
    thoughts_text = "Waiting for your input..."

    def prepare(self) -> None:
        self.tips = self.text_template(self.params.tips or "")

    def references(self):
        return [("params.tips", r) for r in self.tips.refs]

    async def run(self, state, ctx) -> Result:
        state, writes = await settle_pending(self, self.tips.refs, state, ctx)
        tips = render(self.tips, state, to_text=tips_text) if self.params.enable_tips else ""
        form = self.params.form()
        answer: dict[str, Any] = {}
        if form:
            answer, resumed = ask({"component_id": self.id, "inputs": pending_form(form), "tips": tips}, state)
            writes = {**writes, **resumed}
            if self.params.enable_tips and resumed:
                # RAGFlow invokes the form again on the resuming request: its tips are rendered anew, with
                # that turn's values (sys.conversation_turns counted, sys.query...), not the paused turn's
                tips = render(self.tips, with_update(state, writes), to_text=tips_text)
        values = {key: field_value(value, form.get(key)) for key, value in answer.items()}
        files = {key: True for key, value in answer.items() if is_file_field(form.get(key), value)}
        values = await read_files(values, files, ctx, self.id)
        outputs = ({"tips": tips} if self.params.enable_tips else {}) | values
        return Result(outputs=outputs, inputs=values, writes=writes)
