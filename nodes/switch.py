"""Switch: the first matching condition picks the branch, else `end_cpn_ids` (SPEC 3.7)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from canvas2graph.types import NodeConfigError
from canvas2graph.compiler.dsl.refs import Ref
from canvas2graph.nodes.base import Node, Params, Result, bare_or_braced_ref
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.graph.values import resolve


class SwitchItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    cpn_id: str = ""
    operator: str = ""
    value: Any = ""


class SwitchCondition(BaseModel):
    model_config = ConfigDict(extra="allow")
    logical_operator: str = "and"
    items: list[SwitchItem] = Field(default_factory=list)
    to: list[str] = Field(default_factory=list)

    @field_validator("to", mode="before")
    @classmethod
    def _to(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("to")
    @classmethod
    def _to_nonempty(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("every condition needs a target ('to' is empty)")
        return v


class SwitchParams(Params):
    conditions: list[SwitchCondition] = Field(default_factory=list)
    end_cpn_ids: list[str] = Field(default_factory=list)

    @field_validator("conditions")
    @classmethod
    def _conditions(cls, v: list) -> list:
        if not v:
            raise ValueError("at least one condition is required")
        return v

    @field_validator("end_cpn_ids", mode="before")
    @classmethod
    def _end(cls, v: Any) -> Any:
        v = [v] if isinstance(v, str) else v
        if not v:
            raise ValueError("the else branch needs a target ('end_cpn_ids' is empty)")
        return v


OPERATORS = {"contains", "not contains", "start with", "end with", "empty", "not empty",
             "=", "≠", ">", "<", "≥", "≤"}


def _text(v: Any) -> str:
    return "" if v is None else str(v)


def _number(v: Any) -> float:
    return float(v)


def compare(operator: str, left: Any, right: Any) -> bool:
    """One Switch item, with RAGFlow's coercions: a numeric left side makes the right side a float."""
    if isinstance(left, (int, float)) and operator not in ("empty", "not empty"):
        right = float(right)          # bools are numbers too: "true" raises, as in RAGFlow
    if operator == "contains":
        return _text(right).lower() in _text(left).lower()
    if operator == "not contains":
        return _text(right).lower() not in _text(left).lower()
    if operator == "start with":
        return _text(left).lower().startswith(_text(right).lower())
    if operator == "end with":
        return _text(left).lower().endswith(_text(right).lower())
    if operator == "empty":
        return not left
    if operator == "not empty":
        return bool(left)
    if operator == "=":
        return left == right
    if operator == "≠":
        return left != right
    if operator in (">", "<", "≥", "≤"):
        try:
            a, b = _number(left), _number(right)
        except (TypeError, ValueError):
            a, b = left, right
        return {">": a > b, "<": a < b, "≥": a >= b, "≤": a <= b}[operator]
    raise ValueError(f"Not supported operator: {operator}")


@register("Switch", SwitchParams, outputs=lambda p: {"next", "_next"}, routes=True)
class Switch(Node):
    thoughts_text = "I’m weighing a few options and will pick the next step shortly."

    def prepare(self) -> None:
        self.conditions: list[tuple[str, list[tuple[Ref, str, Any]], list[str]]] = []
        for i, cond in enumerate(self.params.conditions):
            items = []
            for j, item in enumerate(cond.items):
                if not item.cpn_id:
                    continue              # RAGFlow skips items without a variable
                ref = bare_or_braced_ref(item.cpn_id)
                if ref is None:
                    raise NodeConfigError(f"params.conditions.{i}.items.{j}.cpn_id",
                                          f"{item.cpn_id!r} is not a variable reference")
                if item.operator not in OPERATORS:
                    raise NodeConfigError(f"params.conditions.{i}.items.{j}.operator",
                                          f"unknown operator {item.operator!r}; use one of {', '.join(sorted(OPERATORS))}")
                items.append((ref, item.operator, item.value))
            self.conditions.append(((cond.logical_operator or "and").lower(), items, list(cond.to)))

    def references(self):
        return [(f"params.conditions.{i}", ref) for i, (_, items, _) in enumerate(self.conditions) for ref, _, _ in items]

    def routes(self) -> list[tuple[str, list[str]]]:
        return [(f"Case {i + 1}", to) for i, (_, _, to) in enumerate(self.conditions)] + [("else", list(self.params.end_cpn_ids))]

    def _matches(self, logic: str, items, state, seen: dict) -> bool:
        results = []
        for ref, op, value in items:
            left = resolve(state, ref)
            seen[ref.expr] = left
            ok = compare(op, left, value)
            if logic == "or" and ok:
                return True
            results.append(ok)
        return logic != "or" and bool(results) and all(results)

    async def run(self, state, ctx) -> Result:
        seen: dict[str, Any] = {}
        targets = list(self.params.end_cpn_ids)
        for logic, items, to in self.conditions:
            if self._matches(logic, items, state, seen):
                targets = to
                break
        for _, items, _ in self.conditions:          # node_finished reports every variable it reads
            for ref, _, _ in items:
                if ref.expr not in seen:
                    seen[ref.expr] = resolve(state, ref)
        names = [self.canvas.display_name(t) for t in targets]
        return Result(outputs={"next": names, "_next": targets}, inputs=seen)
