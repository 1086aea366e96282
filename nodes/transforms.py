"""StringTransform, ListOperations and DataOperations: pure transforms of upstream values (SPEC 3.12-3.14).

None of them calls a model or writes outside its own channel. Templates and refs are parsed once
in `prepare()`; `run()` only reads state.
"""
from __future__ import annotations

import ast
import copy
import json
import re
from typing import Any

from jinja2 import TemplateSyntaxError
from pydantic import Field, field_validator, model_validator

from canvas2graph.types import NodeConfigError
from canvas2graph.compiler.dsl.refs import Ref, Template, has_jinja
from canvas2graph.nodes import jinja
from canvas2graph.nodes.base import Node, Params, Result, require_ref, settle_pending, template
from canvas2graph.nodes.registry import register
from canvas2graph.runtime.graph.values import as_json_text, render, resolve



def _unique(refs) -> list[Ref]:
    seen: dict[str, Ref] = {}
    for r in refs:
        seen.setdefault(r.expr, r)
    return list(seen.values())



# ----------------------------------------------------------------------------------------------
# StringTransform (SPEC 3.12)
# ----------------------------------------------------------------------------------------------

class StringTransformParams(Params):
    method: str = "split"
    script: str = ""
    split_ref: str = ""
    delimiters: list[str] = Field(default_factory=lambda: [","])
    outputs: Any = Field(default_factory=lambda: {"result": {"value": "", "type": "string"}})

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        if v not in ("split", "merge"):
            raise ValueError(f"method must be 'split' or 'merge', not {v!r}")
        return v

    @field_validator("script", "split_ref", mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("delimiters", mode="before")
    @classmethod
    def _delimiters(cls, v: Any) -> Any:
        if isinstance(v, str):          # RAGFlow iterates a string: each character is a delimiter
            v = list(v)
        if not v:
            raise ValueError("delimiters must not be empty: give at least one delimiter")
        if not isinstance(v, list) or not all(isinstance(d, str) for d in v):
            raise ValueError("delimiters must be a list of strings")
        return v


def _sanitised(expr: str) -> str:
    """The name RAGFlow gives a ref inside a merge script before Jinja runs ('@', ':', '.' -> '_')."""
    return expr.replace("@", "_").replace(":", "_").replace(".", "_")


def merge_text(value: Any, delimiter: str) -> str:
    """How a merge script prints a value: lists joined with the first delimiter, others as JSON."""
    if value is None:
        return ""
    if isinstance(value, list):
        return delimiter.join(str(v) for v in value)
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return ""


@register("StringTransform", StringTransformParams, outputs=lambda p: {"result"})
class StringTransform(Node):
    """split: one text -> list of pieces; merge: a script with refs -> one text."""
    param_outputs = ("result",)

    def prepare(self) -> None:
        p = self.params
        self.split_ref: Ref | None = None
        self.script: Template | None = None
        if p.method == "split":
            self.split_ref = require_ref(p.split_ref, "params.split_ref", "split_ref (the text to split)")
            # The delimiters are fixed, so the splitter is built once; alternation order is RAGFlow's.
            self.splitter = re.compile("|".join(re.escape(d) for d in p.delimiters), re.DOTALL)
            return
        self.script = template(p.script)
        self.refs = _unique(self.script.refs)
        # RAGFlow replaces each "{expr}" by a plain name, renders Jinja if the result looks like
        # Jinja, then replaces every occurrence of each name by the value's text.
        self.named_script = "".join(part if isinstance(part, str) else _sanitised(part.expr)
                                    for part in self.script.exact)
        self.jinja = None
        if has_jinja(self.named_script):
            try:
                self.jinja = jinja.compile_template(self.named_script)
            except TemplateSyntaxError as e:
                raise NodeConfigError("params.script", f"the script is not a valid Jinja template: {e.message}") from e

    def references(self):
        if self.split_ref is not None:
            return [("params.split_ref", self.split_ref)]
        return [("params.script", r) for r in self.script.refs] if self.script else []

    def thoughts(self, state) -> str:
        return f"It's {self.params.method}ing."

    async def run(self, state, ctx) -> Result:
        if self.params.method == "split":
            state, writes = await settle_pending(self, [self.split_ref], state, ctx)
            return self._split(state, writes)
        state, writes = await settle_pending(self, self.refs, state, ctx)
        delimiter = self.params.delimiters[0]
        names: dict[str, str] = {}
        inputs: dict[str, str] = {}
        for ref in self.refs:
            text = merge_text(resolve(state, ref), delimiter)
            inputs[ref.expr] = text
            names[_sanitised(ref.expr)] = text
        text = self.named_script
        if self.jinja is not None:
            try:
                text = jinja.render(self.jinja, names)
            except jinja.TemplateLimit:
                raise                      # a bound, not a template RAGFlow would fail on
            except Exception:
                pass                       # RAGFlow keeps the unrendered script when Jinja fails
        text = jinja.replace_names(text, names)
        return Result(outputs={"result": text}, inputs=inputs, writes=writes)

    def _split(self, state, writes) -> Result:
        value = resolve(state, self.split_ref)
        if not value:
            value = ""
        if not isinstance(value, str):
            raise TypeError(f"The input variable is not a string: {type(value)}")
        return Result(outputs={"result": self.splitter.split(value)}, inputs={}, writes=writes)


# ----------------------------------------------------------------------------------------------
# ListOperations (SPEC 3.13)
# ----------------------------------------------------------------------------------------------

LIST_OPERATIONS = ("nth", "head", "tail", "filter", "sort", "drop_duplicates")
FILTER_OPERATORS = ("=", "≠", "contains", "start with", "end with")


class ListOperationsParams(Params):
    query: str = ""
    operations: str = "nth"
    n: Any = 0
    strict: Any = False
    sort_method: str | None = "asc"
    sort_by: str | None = ""
    filter: dict[str, Any] = Field(default_factory=lambda: {"operator": "=", "value": ""})

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, v: Any) -> Any:
        if not v:
            raise ValueError("query must not be empty: name the list to operate on, e.g. 'Component:Id@result'")
        return v

    @field_validator("operations", mode="before")
    @classmethod
    def _operations(cls, v: Any) -> str:
        op = "" if v is None else str(v).strip()
        if op.lower() == "topn":            # RAGFlow's old name for head
            op = "head"
        op = op or "nth"
        if op not in LIST_OPERATIONS:
            raise ValueError(f"operations must be one of {', '.join(LIST_OPERATIONS)} (or topN), not {v!r}")
        return op

    @model_validator(mode="after")
    def _filter(self) -> "ListOperationsParams":
        if self.operations == "filter" and not {"operator", "value"} <= set(self.filter):
            raise ValueError("the filter operation needs params.filter with both 'operator' and 'value'")
        return self

    def n_int(self) -> int:
        try:
            return int(self.n)
        except (TypeError, ValueError):
            return 0

    def is_strict(self) -> bool:
        if isinstance(self.strict, str):
            return self.strict.strip().lower() in {"1", "true", "yes", "on"}
        return bool(self.strict)


def hashable(x: Any) -> Any:
    """A deep, order-insensitive-for-dicts key, as RAGFlow uses for sort and drop_duplicates."""
    if isinstance(x, dict):
        return tuple(sorted((k, hashable(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(hashable(v) for v in x)
    if isinstance(x, set):
        return tuple(sorted(hashable(v) for v in x))
    return x


def _str_match(text: str, operator: str, value: Any) -> bool:
    if operator == "=":
        return text == value
    if operator == "≠":
        return text != value
    if operator == "contains":
        return value in text
    if operator == "start with":
        return text.startswith(value)
    if operator == "end with":
        return text.endswith(value)
    return False


@register("ListOperations", ListOperationsParams, outputs=lambda p: {"result", "first", "last"})
class ListOperations(Node):
    param_outputs = ("result", "first", "last")
    thoughts_text = "ListOperation in progress"

    def prepare(self) -> None:
        self.query_ref = require_ref(self.params.query, "params.query", "query (the list to operate on)")

    def references(self):
        return [("params.query", self.query_ref)]

    async def run(self, state, ctx) -> Result:
        state, writes = await settle_pending(self, [self.query_ref], state, ctx)
        items = resolve(state, self.query_ref)
        if not isinstance(items, list):
            raise TypeError("The input of List Operations should be an array.")
        op = self.params.operations
        result = getattr(self, "_" + op)(items)
        return Result(outputs={"result": result,
                               "first": result[0] if result else None,
                               "last": result[-1] if result else None},
                      inputs={self.params.query: items}, writes=writes)

    def _out_of_range(self, op: str, n: int):
        raise ValueError(f"{op} requires n to be within the valid range in strict mode, got {n}.")

    def _nth(self, items: list) -> list:
        n, strict = self.params.n_int(), self.params.is_strict()
        if n == 0 or abs(n) > len(items):
            if strict:
                self._out_of_range("nth", n)
            return []
        return [items[n - 1] if n > 0 else items[n]]

    def _head(self, items: list) -> list:
        n, strict = self.params.n_int(), self.params.is_strict()
        if strict and not 1 <= n <= len(items):
            self._out_of_range("head", n)
        return items[:n] if n >= 1 else []

    def _tail(self, items: list) -> list:
        n, strict = self.params.n_int(), self.params.is_strict()
        if strict and not 1 <= n <= len(items):
            self._out_of_range("tail", n)
        return items[-n:] if n >= 1 else []

    def _filter(self, items: list) -> list:
        operator, value = self.params.filter["operator"], self.params.filter["value"]
        return [i for i in items if _str_match("" if i is None else str(i), operator, value)]

    def _sort(self, items: list) -> list:
        if not items:
            return []
        reverse = (self.params.sort_method or "asc") == "desc"
        if isinstance(items[0], dict):
            keys = [k.strip() for k in (self.params.sort_by or "").split(",") if k.strip()]
            if keys:
                return sorted(items, key=lambda x: tuple(x.get(k) for k in keys), reverse=reverse)
            return sorted(items, key=hashable, reverse=reverse)
        return sorted(items, reverse=reverse)

    def _drop_duplicates(self, items: list) -> list:
        seen: set = set()
        out = []
        for item in items:
            key = hashable(item)
            if key in seen:
                continue
            seen.add(key)
            out.append(item)
        return out


# ----------------------------------------------------------------------------------------------
# DataOperations (SPEC 3.14)
# ----------------------------------------------------------------------------------------------

DATA_OPERATIONS = ("select_keys", "literal_eval", "combine", "filter_values", "append_or_update",
                   "remove_keys", "rename_keys")


class DataOperationsParams(Params):
    query: Any = Field(default_factory=list)
    operations: str = "literal_eval"
    select_keys: list[Any] = Field(default_factory=list)
    filter_values: list[Any] = Field(default_factory=list)
    updates: list[Any] = Field(default_factory=list)
    remove_keys: list[Any] = Field(default_factory=list)
    rename_keys: list[Any] = Field(default_factory=list)
    outputs: Any = Field(default_factory=lambda: {"result": {"value": [], "type": "Array of Object"}})

    @field_validator("operations")
    @classmethod
    def _operations(cls, v: str) -> str:
        if v not in DATA_OPERATIONS:
            hint = ""
            if v.replace(" ", "_") in DATA_OPERATIONS:
                hint = f" (older RAGFlow versions wrote {v!r}; the current name is {v.replace(' ', '_')!r})"
            raise ValueError(f"operations must be one of {', '.join(DATA_OPERATIONS)}, not {v!r}{hint}")
        return v

    @field_validator("select_keys", "filter_values", "updates", "remove_keys", "rename_keys", mode="before")
    @classmethod
    def _lists(cls, v: Any) -> Any:
        return [] if v is None else v

    @field_validator("filter_values")
    @classmethod
    def _rules(cls, v: list) -> list:
        for i, rule in enumerate(v):
            if not isinstance(rule, dict):
                raise ValueError(f"filter rule {i} must be an object with key, operator and value")
        return v


def literal_value(data: Any) -> Any:
    """RAGFlow's recursive literal_eval: text that looks like a Python literal becomes that value."""
    if isinstance(data, dict):
        return {k: literal_value(v) for k, v in data.items()}
    if isinstance(data, list):
        return [literal_value(v) for v in data]
    if isinstance(data, str):
        s = data.strip()
        if (s.startswith(("{", "[", "(", "'", '"')) or s.lower() in ("true", "false", "none")
                or s.replace(".", "").isdigit()):
            try:
                return _jsonable(ast.literal_eval(data))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return data
    return data


def _jsonable(value: Any) -> Any:
    """Tuples and sets from literal_eval become lists, so the state stays JSON."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (complex, bytes)):
        return str(value)
    return value


def _norm(v: Any) -> str:
    return "" if v is None else str(v)


@register("DataOperations", DataOperationsParams, outputs=lambda p: {"result"})
class DataOperations(Node):
    param_outputs = ("result",)
    thoughts_text = "DataOperation in progress"

    def prepare(self) -> None:
        p = self.params
        query = p.query if isinstance(p.query, (list, tuple)) else [p.query]
        self.queries: list[tuple[str, Ref]] = [
            (q, require_ref(q, f"params.query.{i}", "each query entry (an object or list of objects)"))
            for i, q in enumerate(query)]
        # Filter and update values may contain refs: parsed once here.
        self.rule_templates = [template(_norm(r.get("value"))) for r in p.filter_values]
        self.update_templates = [template(u.get("value")) if isinstance(u, dict) and isinstance(u.get("value"), str)
                                 else None for u in p.updates]

    def references(self):
        refs = [(f"params.query.{i}", r) for i, (_, r) in enumerate(self.queries)]
        refs += [(f"params.filter_values.{i}.value", r) for i, t in enumerate(self.rule_templates) for r in t.refs]
        refs += [(f"params.updates.{i}.value", r) for i, t in enumerate(self.update_templates) if t for r in t.refs]
        return refs

    async def run(self, state, ctx) -> Result:
        refs = [r for _, r in self.references()]
        state, writes = await settle_pending(self, _unique(refs), state, ctx)
        objects: list[dict] = []
        inputs: dict[str, Any] = {}
        for text, ref in self.queries:
            value = resolve(state, ref)
            inputs[text] = value
            if isinstance(value, dict):
                objects.append(copy.deepcopy(value))
            elif isinstance(value, list):
                objects.extend(copy.deepcopy(x) for x in value if isinstance(x, dict))
        result = getattr(self, "_" + self.params.operations)(objects, state)
        return Result(outputs={"result": result}, inputs=inputs, writes=writes)

    def _select_keys(self, objects: list[dict], state) -> list[dict]:
        keep = self.params.select_keys
        return [{k: v for k, v in obj.items() if k in keep} for obj in objects]

    def _literal_eval(self, objects: list[dict], state) -> list:
        return literal_value(objects)

    def _combine(self, objects: list[dict], state) -> dict:
        out: dict[str, Any] = {}
        for obj in objects:
            for key, value in obj.items():
                if key not in out:
                    out[key] = value
                elif isinstance(out[key], list):
                    if isinstance(value, list):
                        out[key] = out[key] + value
                    else:
                        out[key] = out[key] + [value]
                else:
                    out[key] = [out[key], *value] if isinstance(value, list) else [out[key], value]
        return out

    def _filter_values(self, objects: list[dict], state) -> list[dict]:
        rules = self.params.filter_values
        if not rules or not objects:
            return objects
        targets = []
        for rule, t in zip(rules, self.rule_templates):
            target = render(t, state, spliced=True, to_text=as_json_text) or t.text
            targets.append((rule.get("key"), (rule.get("operator") or "equals").lower(), target))
        return [obj for obj in objects if all(self._match(obj, key, op, target) for key, op, target in targets)]

    @staticmethod
    def _match(obj: dict, key: Any, op: str, target: str) -> bool:
        if key not in obj:
            return False
        return _str_match(_norm(obj.get(key)), op, target)

    def _append_or_update(self, objects: list[dict], state) -> list[dict]:
        if not objects:
            return []
        values = []
        for item, t in zip(self.params.updates, self.update_templates):
            if not isinstance(item, dict):
                continue
            key = _norm(item.get("key")).strip()
            if not key:
                continue
            raw = item.get("value")
            values.append((key, (render(t, state, spliced=True, to_text=as_json_text) or raw) if t else raw))
        out = []
        for obj in objects:
            new = dict(obj)
            for key, value in values:
                new[key] = copy.deepcopy(value)
            out.append(new)
        return out

    def _remove_keys(self, objects: list[dict], state) -> list[dict]:
        keys = [k for k in self.params.remove_keys if isinstance(k, str)]
        return [{k: v for k, v in obj.items() if k not in keys} for obj in objects]

    def _rename_keys(self, objects: list[dict], state) -> list[dict]:
        pairs = []
        for pair in self.params.rename_keys:
            if not isinstance(pair, dict):
                continue
            old, new = _norm(pair.get("old_key")).strip(), _norm(pair.get("new_key")).strip()
            if old and new and old != new:
                pairs.append((old, new))
        out = []
        for obj in objects:
            new_obj = dict(obj)
            for old, new in pairs:
                if old in new_obj:
                    new_obj[new] = new_obj.pop(old)
            out.append(new_obj)
        return out
