"""Categorize: an LLM picks a category; its `to` list is the next step (SPEC 3.6).

Matching follows RAGFlow: count case-insensitive occurrences of each category name in the
answer, the highest count wins (ties: the first category), no match: the LAST category.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from canvas2graph.types import NodeConfigError
from canvas2graph.nodes.base import Node, Params, Result, bare_or_braced_ref, settle_pending
from canvas2graph.nodes.llm import chosen_model, complete
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.graph.state import HISTORY
from canvas2graph.runtime.graph.turn import history_messages
from canvas2graph.runtime.graph.values import as_json_text, resolve


class CategorizeParams(Params):
    llm_id: str = ""
    category_description: dict[str, dict[str, Any]] = Field(default_factory=dict)
    query: str = "sys.query"
    message_history_window_size: int = Field(1, ge=0)

    @field_validator("llm_id")
    @classmethod
    def _llm_id(cls, v: str) -> str:
        # RAGFlow's check() lets an empty model through and the run fails on it; a check that passes should
        # mean a run that can start (docs/compatibility.md)
        return chosen_model(v)

    @field_validator("category_description")
    @classmethod
    def _categories(cls, v: dict) -> dict:
        if not v:
            raise ValueError("category_description needs at least one category")
        for name, desc in v.items():
            if not name or not name.strip():
                raise ValueError("a category has an empty name")
            if not isinstance(desc, dict):
                raise ValueError(f"category {name!r} must be an object with description, examples and to")
            to = desc.get("to")
            if isinstance(to, str):
                desc["to"] = to = [to]
            if not to:
                raise ValueError(f"category {name!r} has no target ('to' is empty)")
        return v


def pick_category(answer: str, names: list[str]) -> str:
    lowered = answer.lower()
    best, best_count = None, 0
    for name in names:
        count = lowered.count(name.lower())
        if count > best_count:
            best, best_count = name, count
    return best if best is not None else names[-1]


def system_prompt(categories: dict[str, dict[str, Any]]) -> str:
    """Our own wording of the classification task (the shape, not RAGFlow's text)."""
    names = list(categories)
    lines = ["Classify the user's latest message into exactly one of these categories: "
             + ", ".join(names) + ".", ""]
    for name, desc in categories.items():
        lines.append(f"Category: {name}")
        if desc.get("description"):
            lines.append(f"Meaning: {desc['description']}")
        for ex in desc.get("examples") or []:
            for line in str(ex).splitlines():
                if line.strip():
                    lines.append(f'USER: "{line.strip()}" → {name}')
        lines.append("")
    lines.append("Answer with the category name only.")
    return "\n".join(lines)


@register("Categorize", CategorizeParams, outputs=lambda p: {"category_name", "_next"}, routes=True)
class Categorize(Node):
    reads_history = True
    def prepare(self) -> None:
        self.query_ref = bare_or_braced_ref(self.params.query)
        if self.query_ref is None:
            raise NodeConfigError("params.query", f"{self.params.query!r} is not a variable reference")
        self.names = list(self.params.category_description)
        self.system = system_prompt(self.params.category_description)

    def references(self):
        return [("params.query", self.query_ref)]

    def routes(self) -> list[tuple[str, list[str]]]:
        return [(name, list(d["to"])) for name, d in self.params.category_description.items()]

    def thoughts(self, state) -> str:
        return "Which should it falls into " + ",".join(f"`{n}`" for n in self.names) + "? ..."

    async def run(self, state, ctx) -> Result:
        if not self.params.llm_id:
            raise ValueError("llm_id is empty: choose a model for this Categorize, or give a default with "
                             "--default-llm or CANVAS2GRAPH_DEFAULT_LLM")
        state, writes = await settle_pending(self, [self.query_ref], state, ctx)
        query = resolve(state, self.query_ref)
        messages = history_messages(state.get(HISTORY) or [], self.params.message_history_window_size)
        if messages:
            messages[-1] = {**messages[-1], "content": as_json_text(query)}
        else:
            messages = [{"role": "user", "content": as_json_text(query)}]
        dialogue = " | ".join(f'{m["role"].upper()}: "{m["content"]}"' for m in messages)
        prompt = [{"role": "system", "content": self.system},
                  {"role": "user", "content": f"---- Real Data ----\n{dialogue} →"}]
        answer = await complete(self.params.llm_id, self.id, prompt, ctx)
        if "**ERROR**" in answer:
            raise ValueError(answer)
        name = pick_category(answer, self.names)
        return Result(outputs={"category_name": name, "_next": list(self.params.category_description[name]["to"])},
                      inputs={self.query_ref.expr: query}, writes=writes)
