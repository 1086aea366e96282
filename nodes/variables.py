"""VariableAssigner and VariableAggregator: writing variables and joining exclusive branches (SPEC 3.10, 3.11)."""
from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import Field, field_validator

from canvas2graph.types import NodeConfigError
from canvas2graph.compiler.dsl.model import global_problem
from canvas2graph.compiler.dsl.refs import Ref, Template
from canvas2graph.nodes.base import Node, Params, Result, is_pending, require_ref, settle_pending, template
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.graph.state import GLOBALS, OUTPUTS, channel, outputs_of
from canvas2graph.runtime.graph.values import as_json_text, render, resolve



# ----------------------------------------------------------------------------------------------
# VariableAssigner (SPEC 3.10)
# ----------------------------------------------------------------------------------------------

OPERATORS = ("overwrite", "clear", "set", "append", "extend", "remove_first", "remove_last", "+=", "-=", "*=", "/=")
NO_PARAMETER = ("clear", "remove_first", "remove_last")
REF_PARAMETER = ("overwrite", "append", "extend")      # RAGFlow looks the parameter up as a variable

NOT_LIST = "ERROR:VARIABLE_NOT_LIST"
PARAMETER_NOT_LIST = "ERROR:PARAMETER_NOT_LIST"
NOT_ELEMENT_TYPE = "ERROR:PARAMETER_NOT_LIST_ELEMENT_TYPE"
NOT_NUMBER = "ERROR:VARIABLE_NOT_NUMBER or PARAMETER_NOT_NUMBER"
DIVIDE_BY_ZERO = "ERROR:DIVIDE_BY_ZERO"


class VariableAssignerParams(Params):
    variables: Any = Field(default_factory=list)     # RAGFlow's check() always passes


@dataclass(frozen=True)
class Assignment:
    """One `{variable, operator, parameter}` item, parsed at compile time."""

    target: Ref
    operator: str
    parameter: Any
    parameter_ref: Ref | None = None         # overwrite / append / extend
    parameter_text: Template | None = None   # set, when the parameter is text


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def cleared(value: Any) -> Any:
    """The empty value of the variable's own type."""
    if isinstance(value, list):
        return []
    if isinstance(value, str):
        return ""
    if isinstance(value, dict):
        return {}
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    return None


def appended(variable: Any, value: Any) -> Any:
    if variable is None:
        variable = []
    if not isinstance(variable, list):
        return NOT_LIST
    if variable and not isinstance(value, type(variable[0])):
        return NOT_ELEMENT_TYPE
    return variable + [copy.deepcopy(value)]


def extended(variable: Any, values: Any) -> Any:
    if variable is None:
        variable = []
    if not isinstance(variable, list):
        return NOT_LIST
    if not isinstance(values, list):
        return PARAMETER_NOT_LIST
    if variable and values and not isinstance(values[0], type(variable[0])):
        return NOT_ELEMENT_TYPE
    return variable + copy.deepcopy(values)


def arithmetic(operator: str, variable: Any, parameter: Any) -> Any:
    if not (is_number(variable) and is_number(parameter)):
        return NOT_NUMBER
    if operator == "+=":
        return variable + parameter
    if operator == "-=":
        return variable - parameter
    if operator == "*=":
        return variable * parameter
    if parameter == 0:
        return DIVIDE_BY_ZERO
    return variable / parameter


def nested_set(root: Any, path: tuple[str, ...], value: Any, where: str) -> dict:
    """RAGFlow's set_variable_param_value on a copy: missing or non-dict steps become {}."""
    if not root:
        root = {}
    if not isinstance(root, dict):
        raise TypeError(f"cannot set '{'.'.join(path)}' inside {where}: it holds a {type(root).__name__}, not an object")
    root = copy.deepcopy(root)
    cur = root
    for key in path[:-1]:
        if not isinstance(cur.get(key), dict):
            cur[key] = {}
        cur = cur[key]
    cur[path[-1]] = value
    return root


@register("VariableAssigner", VariableAssignerParams, outputs=lambda p: set())
class VariableAssigner(Node):
    """Applies each item in order; later items see the values earlier items wrote."""

    thoughts_text = "Assign variables from canvas."

    def prepare(self) -> None:
        self.items: list[Assignment] = []
        if isinstance(self.params.variables, list):      # RAGFlow does nothing otherwise
            for i, item in enumerate(self.params.variables):
                self.items.append(self._parse(i, item))
        # what run() reads, de-duplicated once here rather than at every run (a Loop runs it per pass)
        self.reads: list[Ref] = list({r.expr: r for _, r in self.references()}.values())

    def _parse(self, i: int, item: Any) -> Assignment:
        where = f"params.variables.{i}"
        if not isinstance(item, dict):
            raise NodeConfigError(where, "each item must be an object with variable, operator and parameter")
        if not item.get("variable"):
            raise NodeConfigError(f"{where}.variable", "the item names no variable to assign")
        operator = item.get("operator")
        if not operator:
            raise NodeConfigError(f"{where}.operator", "the item has no operator")
        if operator not in OPERATORS:
            raise NodeConfigError(f"{where}.operator", f"unsupported operator {operator!r}; use one of {', '.join(OPERATORS)}")
        target = require_ref(item["variable"], f"{where}.variable", "the variable")
        parameter = item.get("parameter")
        if parameter is None and operator not in NO_PARAMETER:
            raise NodeConfigError(f"{where}.parameter", f"operator {operator!r} needs a parameter")
        parameter_ref = parameter_text = None
        if operator in REF_PARAMETER:
            parameter_ref = require_ref(parameter, f"{where}.parameter",
                                      f"the parameter of {operator!r} (RAGFlow reads it as a variable; use 'set' for a constant)")
        elif operator == "set" and isinstance(parameter, str):
            parameter_text = template(parameter)
        return Assignment(target, operator, parameter, parameter_ref, parameter_text)

    def references(self):
        refs: list[tuple[str, Ref]] = []
        for i, a in enumerate(self.items):
            refs.append((f"params.variables.{i}.variable", a.target))
            if a.parameter_ref is not None:
                refs.append((f"params.variables.{i}.parameter", a.parameter_ref))
            if a.parameter_text is not None:
                refs += [(f"params.variables.{i}.parameter", r) for r in a.parameter_text.refs]
        return refs

    async def run(self, state, ctx) -> Result:
        view, settled = await settle_pending(self, self.reads, state, ctx)
        view = dict(view)
        view[OUTPUTS] = dict(view.get(OUTPUTS) or {})      # a private copy _write may update in place
        writes: dict[str, dict[str, Any]] = {k: dict(v) for k, v in settled.items()}
        for a in self.items:
            new = self._operate(a, resolve(view, a.target), view)
            self._write(view, writes, a.target, new)
        own = writes.pop(self.channel, {})
        return Result(outputs=own, inputs={}, writes=writes)

    def _operate(self, a: Assignment, variable: Any, view: Mapping[str, Any]) -> Any:
        op, parameter = a.operator, a.parameter
        if op == "overwrite":
            return copy.deepcopy(resolve(view, a.parameter_ref))
        if op == "clear":
            return cleared(variable)
        if op == "set":
            if variable is None or isinstance(variable, str):
                if a.parameter_text is None:
                    raise TypeError(f"set: the variable holds text, so the parameter must be text, not {type(parameter).__name__}")
                return render(a.parameter_text, view, spliced=True, to_text=as_json_text)
            return copy.deepcopy(parameter)
        if op == "append":
            return appended(variable, resolve(view, a.parameter_ref))
        if op == "extend":
            return extended(variable, resolve(view, a.parameter_ref))
        if op in ("remove_first", "remove_last"):
            if not isinstance(variable, list):
                return NOT_LIST
            if not variable:
                return variable
            return variable[1:] if op == "remove_first" else variable[:-1]
        return arithmetic(op, variable, parameter)

    @staticmethod
    def _write(view: dict, writes: dict, target: Ref, value: Any) -> None:
        """RAGFlow's set_variable_value, applied to the local view and recorded as channel writes."""
        if target.kind == "global":
            problem = global_problem(target.name, value)
            if problem:         # every turn's start reads the system variables
                raise TypeError(f"{problem}, not a {type(value).__name__}")
            view[GLOBALS] = {**(view.get(GLOBALS) or {}), target.name: value}
            writes.setdefault(GLOBALS, {})[target.name] = value
            return
        outputs = outputs_of(view, target.name)
        if target.path:
            value = nested_set(outputs.get(target.key, ""), target.path, value, f"{target.name}@{target.key}")
        view[OUTPUTS][target.name] = {**outputs, target.key: value}
        writes.setdefault(channel(target.name), {})[target.key] = value


# ----------------------------------------------------------------------------------------------
# VariableAggregator (SPEC 3.11)
# ----------------------------------------------------------------------------------------------

class VariableAggregatorParams(Params):
    groups: list[Any] = Field(default_factory=list)

    @field_validator("groups", mode="before")
    @classmethod
    def _groups(cls, v: Any) -> Any:
        if not v:
            raise ValueError("groups must not be empty: add at least one group of variables")
        if not isinstance(v, list):
            raise ValueError("groups must be a list of {group_name, variables} objects")
        for i, g in enumerate(v):
            if not isinstance(g, dict):
                raise ValueError(f"group {i} must be an object with group_name and variables")
            name = g.get("group_name")
            if not name:
                raise ValueError(f"group {i} has no group_name")
            if not g.get("variables"):
                raise ValueError(f"variables of group `{name}` must not be empty")
            if not isinstance(g.get("variables"), list):
                raise ValueError(f"variables of group `{name}` must be a list of {{\"value\": <reference>}} objects")
        return v

    def group_names(self) -> set[str]:
        return {str(g["group_name"]) for g in self.groups}


@register("VariableAggregator", VariableAggregatorParams, outputs=lambda p: p.group_names())
class VariableAggregator(Node):
    """Each group's output is its first truthy variable; a group with none stays unset."""

    thoughts_text = "Aggregating variables from canvas and grouping as configured."

    def prepare(self) -> None:
        self.groups: list[tuple[str, list[Ref], list[Any]]] = []
        for i, g in enumerate(self.params.groups):
            refs = []
            for j, sel in enumerate(g["variables"]):
                where = f"params.groups.{i}.variables.{j}"
                if not isinstance(sel, dict):
                    raise NodeConfigError(where, 'each variable must be an object like {"value": "Component:Id@content"}')
                refs.append(require_ref(sel.get("value"), f"{where}.value", "the variable"))
            self.groups.append((str(g["group_name"]), refs, copy.deepcopy(g["variables"])))

    def references(self):
        return [(f"params.groups.{i}.variables.{j}.value", r)
                for i, (_, refs, _) in enumerate(self.groups) for j, r in enumerate(refs)]

    async def run(self, state, ctx) -> Result:
        outputs: dict[str, Any] = {}
        inputs: dict[str, Any] = {}
        writes: dict[str, Any] = {}
        for name, refs, selectors in self.groups:
            inputs[f"{name}.variables"] = copy.deepcopy(selectors)
            for ref in refs:
                value = resolve(state, ref)
                if is_pending(value):         # a generation nobody streamed: run it now
                    state, settled = await settle_pending(self, [ref], state, ctx)
                    writes.update(settled)
                    value = resolve(state, ref)
                if value:
                    outputs[name] = value
                    break
        return Result(outputs=outputs, inputs=inputs, writes=writes)
