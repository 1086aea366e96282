"""Loop, LoopItem and ExitLoop: repeat the body while the termination condition is false (SPEC 3.9).

RAGFlow checks the condition before every pass, including the first, so a Loop behaves like
`while not condition`, capped at `maximum_loop_count` passes. Loop variables are the Loop's
outputs; body components update them with VariableAssigner (`Loop:Id@name`).
"""
from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from canvas2graph.compiler.dsl.refs import Ref
from canvas2graph.nodes.base import Node, Params, Result, bare_or_braced_ref, require_ref
from canvas2graph.nodes.iteration import progress
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.graph.state import LOOPS
from canvas2graph.runtime.graph.values import resolve


class LoopParams(Params):
    loop_variables: list[Any] = Field(default_factory=list)
    loop_termination_condition: list[Any] = Field(default_factory=list)
    maximum_loop_count: int = Field(0, ge=0)

    @field_validator("loop_variables")
    @classmethod
    def _variables(cls, v: list) -> list:
        for i, var in enumerate(v):
            if not isinstance(var, dict) or not var.get("variable") or not var.get("input_mode") or not var.get("type"):
                raise ValueError(f"loop variable {i} is not complete: it needs variable, input_mode and type")
            mode = var["input_mode"]
            if mode not in ("constant", "variable"):
                raise ValueError(f"loop variable {var['variable']!r}: input_mode must be constant or variable")
            if mode == "variable" and var.get("value") in (None, ""):
                raise ValueError(f"loop variable {var['variable']!r} takes its value from a variable but names none")
            if mode == "constant" and var.get("value") is None:
                raise ValueError(f"loop variable {var['variable']!r} has no constant value")
        return v

    @field_validator("loop_termination_condition")
    @classmethod
    def _conditions(cls, v: list) -> list:
        for i, cond in enumerate(v):
            if not isinstance(cond, dict) or not cond.get("variable") or not cond.get("operator"):
                raise ValueError(f"termination condition {i} needs a variable and an operator")
        return v

    def logic(self) -> str:
        return str(self.extra("logical_operator") or "and").lower()


def _loop_outputs(p: LoopParams) -> set[str]:
    return {str(v["variable"]) for v in p.loop_variables if isinstance(v, dict) and v.get("variable")}


@register("Loop", LoopParams, outputs=_loop_outputs)
class Loop(Node):
    role = "container"
    start_type = "LoopItem"
    thoughts_text = "Loop from canvas."

    def prepare(self) -> None:
        self.initial: list[tuple[str, Ref | None, Any]] = []
        for i, var in enumerate(self.params.loop_variables):
            if var["input_mode"] == "variable":
                ref = require_ref(var["value"], f"params.loop_variables.{i}.value", "a variable-mode value")
                self.initial.append((var["variable"], ref, None))
            else:
                self.initial.append((var["variable"], None, var["value"]))

    def references(self):
        return [(f"params.loop_variables.{i}.value", ref) for i, (_, ref, _) in enumerate(self.initial) if ref]

    def max_passes(self) -> int:
        return self.params.maximum_loop_count + 1

    async def run(self, state, ctx) -> Result:
        outputs = {name: (resolve(state, ref) if ref else value) for name, ref, value in self.initial}
        return Result(outputs=outputs, writes={LOOPS: {self.id: {"idx": 0, "done": False}}})


class ConditionError(ValueError):
    pass


def holds(operator: str, left: Any, right: Any) -> bool:
    """One termination condition, by the runtime type of the variable (SPEC 3.9)."""
    if left is None:
        return operator == "empty"
    if operator == "empty":
        return not left
    if operator == "not empty":
        return bool(left)
    if isinstance(left, bool):
        if operator == "is":
            return isinstance(right, bool) and left is right
        if operator == "is not":
            return not (isinstance(right, bool) and left is right)
    elif isinstance(left, (int, float)):
        try:
            if operator == "=":
                return left == right
            if operator == "≠":
                return left != right
            if operator in (">", "<", "≥", "≤"):
                return {">": lambda: left > right, "<": lambda: left < right,
                        "≥": lambda: left >= right, "≤": lambda: left <= right}[operator]()
        except TypeError:
            raise ConditionError(f"cannot compare the number {left!r} with {right!r} using {operator!r}")
    elif isinstance(left, str):
        text = "" if right is None else str(right)
        if operator == "contains":
            return text in left
        if operator == "not contains":
            return text not in left
        if operator == "start with":
            return left.startswith(text)
        if operator == "end with":
            return left.endswith(text)
        if operator == "is":
            return left == right
        if operator == "is not":
            return left != right
    elif isinstance(left, list):
        if operator == "contains":
            return right in left
        if operator == "not contains":
            return right not in left
        if operator == "is":
            return left == right
        if operator == "is not":
            return left != right
    raise ConditionError(f"operator {operator!r} does not apply to a {type(left).__name__} value")


@register("LoopItem", Params, outputs=lambda p: set())
class LoopItem(Node):
    role = "start"
    thoughts_text = "Next turn..."

    def prepare(self) -> None:
        parent = self.canvas.entries.get(self.parent_id or "")
        params = parent.params if parent else {}
        self.maximum = int(params.get("maximum_loop_count") or 0)
        self.logic = str(params.get("logical_operator") or "and").lower()
        self.conditions: list[tuple[Ref, str, Ref | None, Any]] = []
        for i, cond in enumerate(params.get("loop_termination_condition") or []):
            if not isinstance(cond, dict) or not cond.get("variable"):
                continue          # the Loop's own params check reports it
            variable = require_ref(cond["variable"], f"params.loop_termination_condition.{i}.variable", "the condition's variable")
            value_ref = bare_or_braced_ref(cond.get("value")) if cond.get("input_mode") == "variable" else None
            self.conditions.append((variable, str(cond.get("operator") or ""), value_ref, cond.get("value")))

    def references(self):
        refs = [("params.loop_termination_condition", v) for v, _, _, _ in self.conditions]
        return refs + [("params.loop_termination_condition", r) for _, _, r, _ in self.conditions if r]

    def _finished(self, state) -> bool:
        results = []
        for variable, operator, value_ref, value in self.conditions:
            right = resolve(state, value_ref) if value_ref else value
            try:
                results.append(holds(operator, resolve(state, variable), right))
            except ConditionError as e:      # name the condition, not only the operator
                raise ConditionError(f"termination condition {variable.expr} {operator} {right!r}: {e}") from e
        return all(results) if self.logic != "or" else any(results)

    async def run(self, state, ctx) -> Result:
        container = self.parent_id or ""
        idx = int(progress(state, container).get("idx") or 0)
        done = idx >= self.maximum
        if not done:
            idx += 1
            done = self._finished(state)     # checked before every pass, the first included
        return Result(outputs={}, writes={LOOPS: {container: {"idx": idx, "done": done}}})


@register("ExitLoop", Params, outputs=lambda p: set())
class ExitLoop(Node):
    role = "exit"

    def prepare(self) -> None:
        parent = self.parent_id
        self.inner: list[str] = []          # Iterations between this ExitLoop and its Loop, innermost first
        # (canvas2graph.compiler.dsl.load refuses parent cycles; the `not in` only keeps this walk finite regardless)
        while parent and parent in self.canvas.entries and parent not in self.inner \
                and self.canvas.entries[parent].component_name != "Loop":
            self.inner.append(parent)
            parent = self.canvas.entries[parent].parent_id
        self.loop = parent if parent in self.canvas.entries else None

    async def run(self, state, ctx) -> Result:
        if not self.loop:
            return Result(outputs={})
        # every container left on the way out is done too, so each reports its node_finished
        left = {cid: {**progress(state, cid), "done": True} for cid in self.inner}
        return Result(outputs={}, writes={LOOPS: {**left, self.loop: {"idx": -1, "done": True}}})
