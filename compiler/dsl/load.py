"""Load a DSL document: JSON text -> unwrapped, migrated dict -> `CanvasDSL`.

Accepted shapes (SPEC 2.1): a bare DSL (`{"components": ...}`), a RAGFlow template
(`{"id", "title", "dsl": {...}}`), an agent record as RAGFlow stores or exports it
(`{"title", "dsl": ...}`), and an API reply envelope (`{"code": 0, "data": {...}}`).
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from canvas2graph.text import REPLACEMENT, SURROGATE
from canvas2graph.compiler.dsl.diagnostics import Collector, CompileError
from canvas2graph.compiler.dsl.legacy import is_legacy, migrate_legacy
from canvas2graph.compiler.dsl.model import CanvasDSL, ComponentEntry, global_problem

# RAGFlow's agent/dsl_migration.py renames these on every load.
LEGACY_RENAMES = {
    "Splitter": "TokenChunker",
    "HierarchicalMerger": "TitleChunker",
    "PDFGenerator": "DocGenerator",
}
# Bounds that keep compiling linear in the input and its memory a small multiple of it (docs/performance.md)
MAX_DEPTH = 200            # deeper documents are refused rather than risking recursion errors
MAX_COMPONENTS = 10_000    # RAGFlow's canvases hold tens; each component costs a few KB once planned
MAX_NESTING = 32           # containers inside containers (an Iteration in a Loop in ...)
INT64 = (-2 ** 63, 2 ** 63 - 1)   # what the checkpointers' serializer stores


def parse_json(text: str | bytes) -> Any:
    """Parse JSON, turning syntax errors into a diagnostic with line and column."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise CompileError([_diag("invalid-encoding", f"the file is not UTF-8 text ({e.reason} at byte {e.start})")])
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CompileError([_diag("invalid-json", f"invalid JSON: {e.msg}", line=e.lineno, column=e.colno)])
    except RecursionError:
        raise CompileError([_diag("too-deep", f"the document nests deeper than {MAX_DEPTH} levels")])
    except ValueError as e:      # an integer literal longer than Python converts (4,300 digits)
        raise CompileError([_diag("invalid-json", f"invalid JSON: {e}".split(";")[0])])


def _diag(code: str, message: str, **kw):
    from canvas2graph.compiler.dsl.diagnostics import Diagnostic
    return Diagnostic(code, message, **kw)


def unwrap(doc: Any) -> dict:
    """Find the DSL inside a template, agent record or API envelope."""
    if not isinstance(doc, dict):
        raise CompileError([_diag("not-an-object", f"a DSL must be a JSON object, not {type(doc).__name__}")])
    seen = 0
    while "components" not in doc and seen < 3:
        seen += 1
        if isinstance(doc.get("dsl"), dict):
            doc = doc["dsl"]
        elif isinstance(doc.get("dsl"), str):      # some exports store the DSL as a JSON string
            doc = parse_json(doc["dsl"])
            if not isinstance(doc, dict):
                raise CompileError([_diag("not-an-object", "the 'dsl' string does not hold a JSON object", field="dsl")])
        elif isinstance(doc.get("data"), dict) and "code" in doc:
            doc = doc["data"]
        else:
            break
    if "components" not in doc:
        if isinstance(doc.get("graph"), dict):
            raise CompileError([_diag("graph-only", "the DSL has a 'graph' but no 'components'; open and save it in RAGFlow's editor so it writes 'components'", field="components")])
        raise CompileError([_diag("no-components", "no 'components' found: expected a DSL, a template with 'dsl', or an agent record", field="components")])
    return doc


def _check_depth(value: Any, limit: int = MAX_DEPTH) -> bool:
    return too_deep_at(value, limit) is None


def too_deep_at(value: Any, limit: int = MAX_DEPTH) -> list | None:
    """The path (keys and indices) to the first value nested deeper than `limit`, or None when the
    document stays within it. Iterative and linear: each node is visited once, and its path is a chain of
    links to its parent's, rebuilt only for the one value past the limit."""
    stack: list[tuple[Any, int, tuple | None]] = [(value, 0, None)]
    while stack:
        v, d, link = stack.pop()
        if d > limit:
            path = []
            while link is not None:
                key, link = link
                path.append(key)
            return path[::-1]
        if isinstance(v, dict):
            stack.extend((x, d + 1, (k, link)) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, d + 1, (i, link)) for i, x in enumerate(v))
    return None


FIELD_SEGMENTS = 3          # how much of a too-deep value's path the diagnostic's field names


def too_deep(value: Any, limit: int = MAX_DEPTH):
    """A `too-deep` diagnostic naming the component and the field that nest past `limit`, or None.

    The path is read inside the DSL wherever the document wraps it (a template's `dsl`, an API envelope's
    `data`): `components.<id>.obj.params.content.0...` names the component `<id>` and the field
    `params.content.0` (its first FIELD_SEGMENTS keys, from `params` on); a value outside every component
    names its own first keys."""
    path = too_deep_at(value, limit)
    if path is None:
        return None
    component = None
    rest = path
    for i, key in enumerate(path[:4]):
        if key == "components" and i + 1 < len(path):
            component, rest = str(path[i + 1]), path[i + 2:]
            if rest[:1] == ["obj"]:
                rest = rest[1:]
            break
    field = ".".join(str(k) for k in rest[:FIELD_SEGMENTS]) or None
    where = (f"component '{component}', field '{field}'" if component and field else
             f"component '{component}'" if component else f"field '{field}'" if field else "the document")
    return _diag("too-deep", f"{where} nests deeper than {limit} levels (a DSL nests at most {limit} levels)",
                 component_id=component, field=field)


_LEGACY_ID = re.compile(r"\b(" + "|".join(LEGACY_RENAMES) + r"):")


def migrate(dsl: dict) -> dict:
    """Apply RAGFlow's legacy renames of component names and id prefixes (dsl_migration.py)."""
    text = json.dumps(dsl, ensure_ascii=False)
    if not _LEGACY_ID.search(text) and not any(f'"{old}"' in text for old in LEGACY_RENAMES):
        return dsl
    text = _LEGACY_ID.sub(lambda m: LEGACY_RENAMES[m.group(1)] + ":", text)
    for old, new in LEGACY_RENAMES.items():
        text = text.replace(f'"component_name": "{old}"', f'"component_name": "{new}"')
        text = text.replace(f'"label": "{old}"', f'"label": "{new}"')
    return json.loads(text)


def load_dsl(source: str | bytes | dict, *, default_llm: str | None = None,
             warnings: list | None = None) -> CanvasDSL:
    """Text or parsed JSON -> CanvasDSL. Raises CompileError with diagnostics on structural problems.
    `default_llm` fills the empty `llm_id`s (see fill_default_llm); `warnings`, when given, receives
    what was repaired on the way (text that is not Unicode)."""
    doc = parse_json(source) if isinstance(source, (str, bytes)) else source
    deep = too_deep(doc)
    if deep is not None:
        raise CompileError([deep])
    dsl = unwrap(doc)
    if dsl is not doc and (deep := too_deep(dsl)) is not None:     # a 'dsl' stored as a JSON string
        raise CompileError([deep])
    notes = warnings if warnings is not None else []
    dsl = check_values(dsl, notes)
    if is_legacy(dsl):                  # a canvas from RAGFlow v0.19 or before (compiler/dsl/legacy.py)
        dsl, said = migrate_legacy(dsl)
        if any(d.severity == "error" for d in said):
            raise CompileError(said)
        notes.extend(said)
    if default_llm:
        dsl = fill_default_llm(dsl, default_llm)
    model = build_model(migrate(dsl))
    model.title = title_of(doc)
    return model


def title_of(doc: Any) -> str:
    """The agent's title from the template, agent record or envelope around a DSL ("" for a bare DSL):
    what traces and pictures are named after."""
    for _ in range(4):
        if not isinstance(doc, dict) or "components" in doc:
            return ""
        title = doc.get("title")
        if isinstance(title, dict):         # RAGFlow's templates: {"en": ..., "zh": ...}
            title = title.get("en") or next((t for t in title.values() if isinstance(t, str) and t.strip()), "")
        if isinstance(title, str) and title.strip():
            return " ".join(title.split())
        doc = doc.get("dsl") if isinstance(doc.get("dsl"), dict) else doc.get("data")
    return ""


# --- values ----------------------------------------------------------------------------------------


def _odd(value: Any) -> bool:
    """A value no JSON reader or checkpointer takes as it is: a lone surrogate (JSON text may escape
    one: "\\ud800"), NaN or an infinity, an integer outside 64 bits."""
    if isinstance(value, str):
        return SURROGATE.search(value) is not None
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return not INT64[0] <= value <= INT64[1]
    return False


def check_values(dsl: dict, warnings: list) -> dict:
    """`dsl` with lone surrogates replaced by U+FFFD (a warning names where), or CompileError naming the
    component and field of every number that cannot be stored: NaN, infinity, beyond 64 bits.

    One pass over every value finds whether anything is odd at all (most DSLs: no); only then a
    second pass, bounded by MAX_DEPTH, rebuilds the document and says where."""
    stack: list[Any] = [dsl]
    odd = False
    while stack and not odd:
        value = stack.pop()
        if isinstance(value, dict):
            odd = any(_odd(k) for k in value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        else:
            odd = _odd(value)
    if not odd:
        return dsl
    errors: list = []
    replaced: dict[tuple, None] = {}
    cleaned = _clean(dsl, (), errors, replaced)
    if errors:
        raise CompileError(errors)
    for where in replaced:
        cid, field = _place(where)
        warnings.append(_diag("not-unicode", "this text holds a lone UTF-16 surrogate, which is not a character; "
                              "it was replaced by U+FFFD", component_id=cid, field=field, severity="warning"))
    return cleaned


def _clean(value: Any, path: tuple, errors: list, replaced: dict) -> Any:
    if isinstance(value, dict):
        return {_clean(k, path, errors, replaced): _clean(v, path + (k,), errors, replaced) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, path + (i,), errors, replaced) for i, v in enumerate(value)]
    if not _odd(value):
        return value
    if isinstance(value, str):
        replaced.setdefault(_field_key(path), None)     # one warning per component field (or top-level key)
        return SURROGATE.sub(REPLACEMENT, value)
    cid, field = _place(path)
    if cid is None and path[:1] not in (("globals",), ("variables",)):
        return value          # layout and other keys the compiler never reads
    what = "NaN" if value != value else "infinity" if isinstance(value, float) else "this integer"
    reason = ("is not a JSON number" if isinstance(value, float)
              else f"is outside the 64-bit range sessions can store ({INT64[0]} to {INT64[1]})")
    errors.append(_diag("bad-number", f"{what} {reason}", component_id=cid, field=field))
    return value


def _field_key(path: tuple) -> tuple:
    """The part of a path a warning names: a component's field (params.content), or a top-level key."""
    if path[:1] == ("components",):
        return path[:5] if path[2:3] == ("obj",) else path[:3]
    return path[:2]


def _place(path: tuple) -> tuple[str | None, str | None]:
    """(component id, field) of a path in the DSL: components.<id>.obj.params.x -> (id, "params.x")."""
    text = [str(p) for p in path]
    if len(path) >= 2 and path[0] == "components":
        rest = text[2:]
        if rest[:1] == ["obj"]:
            rest = rest[1:]
        return text[1], ".".join(rest) or None
    return None, ".".join(text) or None


MODEL_COMPONENTS = ("LLM", "Agent", "Categorize", "Browser", "Extractor", "Compiler")    # pipelines: Extractor, Compiler


def fill_default_llm(doc: Any, llm_id: str) -> Any:
    """A copy of `doc` in which every LLM, Agent, Categorize and Browser without a model (an empty or missing
    `llm_id`), sub-agents among an Agent's tools included, uses `llm_id`.

    RAGFlow's templates ship several agents with an empty `llm_id`, which its engine refuses until a
    user picks a model in the editor; this is that choice, made once for the whole canvas.

    A document nested deeper than MAX_DEPTH is returned unchanged: `load_dsl` refuses it with a
    `too-deep` diagnostic, and descending into it here would only risk a RecursionError first.
    """
    if not _check_depth(doc):
        return doc
    return _fill(doc, llm_id)


def _fill(doc: Any, llm_id: str) -> Any:
    if isinstance(doc, list):
        return [_fill(v, llm_id) for v in doc]
    if not isinstance(doc, dict):
        return doc
    out = {k: _fill(v, llm_id) for k, v in doc.items()}
    params = out.get("params")
    if out.get("component_name") in MODEL_COMPONENTS and isinstance(params, dict) \
            and not str(params.get("llm_id") or "").strip():
        out["params"] = {**params, "llm_id": llm_id}
    return out


def build_model(dsl: dict) -> CanvasDSL:
    out = Collector()
    comps = dsl.get("components")
    if not isinstance(comps, dict):
        raise CompileError([_diag("bad-components", f"'components' must be an object keyed by component id, not {type(comps).__name__}", field="components")])
    if len(comps) > MAX_COMPONENTS:
        raise CompileError([_diag("too-many-components", f"the DSL has {len(comps)} components; at most "
                                  f"{MAX_COMPONENTS} are compiled", field="components")])
    names = _display_names(dsl.get("graph"))
    entries: dict[str, ComponentEntry] = {}
    for cid, raw in comps.items():
        if not isinstance(cid, str) or not cid:     # only possible when a dict is passed in, or ""
            out.error("bad-component-id", f"component ids must be non-empty strings, not {cid!r}", str(cid))
            continue
        entry = _entry(cid, raw, names.get(cid, ""), out)
        if entry is not None:
            entries[cid] = entry
    globals_ = dsl.get("globals") if isinstance(dsl.get("globals"), dict) else {}
    if "globals" in dsl and not isinstance(dsl.get("globals"), dict):
        out.error("bad-globals", "'globals' must be an object of sys.* and env.* values", field="globals")
    _check_globals(globals_, out)
    _check_parents(entries, out)
    variables = dsl.get("variables")
    if isinstance(variables, list):      # legacy form
        variables = {}
    if variables is not None and (not isinstance(variables, dict) or not all(isinstance(k, str) for k in variables)):
        out.error("bad-variables", "'variables' must be an object of env variable declarations", field="variables")
        variables = {}
    if out.has_errors:
        raise CompileError(out.items)
    return CanvasDSL(components=entries, globals=dict(globals_), variables=variables or {}, raw=dsl)


def _display_names(graph: Any) -> dict[str, str]:
    names: dict[str, str] = {}
    if isinstance(graph, dict) and isinstance(graph.get("nodes"), list):
        for node in graph["nodes"]:
            if isinstance(node, dict) and isinstance(node.get("data"), dict):
                name = node["data"].get("name")
                if isinstance(node.get("id"), str) and isinstance(name, str):
                    names[node["id"]] = name
    return names


def _entry(cid: str, raw: Any, display: str, out: Collector) -> ComponentEntry | None:
    if not isinstance(raw, dict):
        out.error("bad-component", f"a component must be an object, not {type(raw).__name__}", cid)
        return None
    obj = raw.get("obj")
    if not isinstance(obj, dict):
        out.error("bad-component", "missing 'obj' with 'component_name' and 'params'", cid, "obj")
        return None
    name = obj.get("component_name")
    if not isinstance(name, str) or not name:
        out.error("bad-component", "'obj.component_name' must be a non-empty string", cid, "obj.component_name")
        return None
    params = obj.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        out.error("bad-params", f"'obj.params' must be an object, not {type(params).__name__}", cid, "obj.params")
        return None
    downstream = raw.get("downstream", [])
    if downstream is None:
        downstream = []
    if not isinstance(downstream, list) or not all(isinstance(d, str) for d in downstream):
        out.error("bad-downstream", "'downstream' must be a list of component ids", cid, "downstream")
        return None
    parent = raw.get("parent_id")
    if parent is not None and not isinstance(parent, str):
        out.error("bad-parent", "'parent_id' must be a component id", cid, "parent_id")
        return None
    # RAGFlow's own data has duplicate downstream ids (customer_feedback_dispatcher): keep the first.
    downstream = list(dict.fromkeys(downstream))
    return ComponentEntry(id=cid, component_name=name, params=params, downstream=downstream,
                          parent_id=parent or None, display_name=display)


def _check_globals(values: dict, out: Collector) -> None:
    for key, value in values.items():
        problem = global_problem(key, value) if isinstance(key, str) else None
        if problem:
            out.error("bad-global", f"{problem}, not {_shown(value)}", field=f"globals.{key}")


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_parents(entries: dict[str, ComponentEntry], out: Collector) -> None:
    """Containers hold their body through the body's `parent_id`: a chain of parents must end, within
    MAX_NESTING levels. Each component's chain is followed at most MAX_NESTING + 1 steps: linear."""
    for cid, entry in entries.items():
        chain = [cid]
        parent = entry.parent_id
        while parent in entries and len(chain) <= MAX_NESTING:
            if parent == cid:
                if len(chain) == 1:
                    out.error("parent-cycle", "parent_id names the component itself: a container cannot be "
                              "inside itself", cid, "parent_id")
                else:
                    out.error("parent-cycle", "parent_id leads back here (" + " -> ".join(chain + [cid]) +
                              "): containers cannot be inside each other both ways", cid, "parent_id")
                break
            if parent in chain:         # leads into a cycle that does not pass here: reported on its members
                break
            chain.append(parent)
            parent = entries[parent].parent_id
        else:
            if parent in entries:
                out.error("too-deep-nesting", f"containers nest more than {MAX_NESTING} levels deep around this "
                          "component", cid, "parent_id")
