"""Graph-level checks on a plan: the entry, edges, references, reachability, cycles."""
from __future__ import annotations

from collections import Counter

from canvas2graph.compiler.dsl.diagnostics import Collector
from canvas2graph.compiler.parallel import check_parallel
from canvas2graph.compiler.plan import Edge, Plan


# Outputs every component may carry (SPEC 2.2): timing, and _ERROR when it fails.
INTERNAL_OUTPUTS = {"_ERROR", "_created_time", "_elapsed_time"}
CONTAINERS = ("Iteration", "Loop")
MAX_REFERENCES = 200        # distinct references in one text (RAGFlow's canvases use a handful)
MAX_CYCLE_REPORTS = 20      # a hostile DSL can hold as many cycles as edges; the first ones say enough


def check_plan(plan: Plan, out: Collector) -> None:
    comps = plan.dsl.components
    if "begin" not in comps:
        out.error("no-begin", "the DSL has no 'begin' component; RAGFlow starts every run there", "begin")
    elif comps["begin"].component_name != "Begin":
        out.error("no-begin", f"component 'begin' must be a Begin, not {comps['begin'].component_name}", "begin", "obj.component_name")

    for cid, entry in comps.items():
        for t in entry.downstream:
            if t not in comps:
                out.error("dangling-downstream", f"downstream names '{t}', which is not a component", cid, "downstream")
        if entry.parent_id and entry.parent_id not in comps:
            out.error("dangling-parent", f"parent_id names '{entry.parent_id}', which is not a component", cid, "parent_id")
        elif entry.parent_id and comps[entry.parent_id].component_name not in CONTAINERS:
            out.error("bad-parent", f"parent_id names '{entry.parent_id}', a {comps[entry.parent_id].component_name}; "
                      "only an Iteration or a Loop holds other components", cid, "parent_id")
    for edge in plan.edges:
        if edge.kind == "route" and edge.target not in comps:
            out.error("dangling-route", f"{edge.label or 'a branch'} leads to '{edge.target}', which is not a component",
                      edge.source, _route_field(plan, edge))
    _check_container_boundaries(plan, out)

    _check_references(plan, out)
    _check_reachable(plan, out)
    _check_cycles(plan, out)
    for cid in plan.starts.values():
        if not comps[cid].downstream:
            container = plan.nodes[cid].parent_id
            out.warning("empty-body", f"'{cid}' leads to no component, so the passes of {comps[container].component_name} "
                        f"'{container}' do nothing", cid, "downstream")
    check_parallel(plan, out)
    for cid, node in plan.nodes.items():      # a component's own warnings (options it cannot honour, say)
        for code, message, field in getattr(node, "warnings", lambda: [])():
            out.warning(code, message, cid, field)


def _route_field(plan: Plan, edge) -> str:
    """Where a branch's targets are written in the params (SPEC 2.3)."""
    ctype = plan.dsl.components[edge.source].component_name
    if ctype == "Switch":
        if edge.label == "else":
            return "params.end_cpn_ids"
        if edge.label.startswith("Case ") and edge.label[5:].isdigit():
            return f"params.conditions.{int(edge.label[5:]) - 1}.to"
    if ctype == "Categorize" and edge.label:
        return f"params.category_description.{edge.label}.to"
    return "params"


def _check_container_boundaries(plan: Plan, out: Collector) -> None:
    """A container's body leads only to its own components: the container leads on when its passes are
    done. An edge across the boundary (a body component to one outside, or one outside into a body)
    would run a body component outside its container's passes, or loop outside forever."""
    comps = plan.dsl.components
    # every `downstream` as written (a container's leads on after its passes, so it is checked too),
    # the branches of routers and the error gotos
    written = [Edge(cid, t, "next") for cid, entry in comps.items() for t in entry.downstream]
    for edge in written + [e for e in plan.edges if e.kind in ("route", "error")]:
        if edge.target not in comps:
            continue
        inside, target_inside = comps[edge.source].parent_id, comps[edge.target].parent_id
        if inside == target_inside or (inside and inside not in comps) or (target_inside and target_inside not in comps):
            continue              # a dangling parent_id is reported as such
        where = {"next": "downstream", "error": "params.exception_goto"}.get(edge.kind) or _route_field(plan, edge)
        if inside:
            what = f"'{edge.target}', which is outside the {comps[inside].component_name} '{inside}' holding this component"
            if target_inside:
                what = f"'{edge.target}', which belongs to '{target_inside}' and not to '{inside}' holding this component"
        else:
            what = f"'{edge.target}', which is inside the {comps[target_inside].component_name} '{target_inside}'"
        out.error("crosses-container", f"{where.split('.')[-1] if edge.kind == 'next' else 'a branch'} leads to "
                  f"{what}; a container's body leads only to its own components, and the container leads on "
                  "when it is done", edge.source, where)


def _successors(plan: Plan, mentioned: bool = False) -> dict[str, list[str]]:
    """The plan's edges, plus the `downstream` of components that could not be planned (unknown,
    unsupported or invalid), so their successors are neither left out of the cycle check nor reported
    as unreachable; with `mentioned`, also every component id they name in their params (their
    branches, say), for reachability."""
    succ: dict[str, list[str]] = {}
    for e in plan.edges:
        succ.setdefault(e.source, []).append(e.target)
    comps = plan.dsl.components
    for cid, entry in comps.items():
        if cid not in plan.nodes:
            succ.setdefault(cid, []).extend(entry.downstream)
            if mentioned:
                succ[cid].extend(t for t in _strings(entry.params) if t in comps and t != cid)
    return succ


def _strings(value) -> list[str]:
    """Every string in a JSON value (a DSL's values nest at most canvas2graph.compiler.dsl.load.MAX_DEPTH deep)."""
    found, stack = [], [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            found.append(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


def _check_references(plan: Plan, out: Collector) -> None:
    globals_ = plan.dsl.initial_globals()
    for cid, node in plan.nodes.items():
        references = node.references()
        per_field = Counter(field for field, _ in set(references))
        for field, count in per_field.items():
            if count > MAX_REFERENCES:    # each is substituted into the whole text in turn (RAGFlow's way)
                out.error("too-many-references", f"{count} different references in one text; at most "
                          f"{MAX_REFERENCES} are substituted", cid, field)
        for field, ref in references:
            if ref.kind == "global":
                if ref.name not in globals_:
                    kind = "conversation variable" if ref.name.startswith("env.") else "system variable"
                    out.error("unknown-variable", f"{{{ref.expr}}} refers to the {kind} '{ref.name}', which the DSL does not define",
                              cid, field)
                continue
            if not ref.name:        # iteration alias, checked by the container
                continue
            if ref.name not in plan.dsl.components:
                out.error("dangling-reference", f"{{{ref.expr}}} refers to component '{ref.name}', which does not exist", cid, field)
                continue
            target = plan.nodes.get(ref.name)
            spec = plan.specs.get(ref.name)
            if target is None or spec is None:
                continue
            try:
                known = spec.outputs(target.params)
            except Exception:       # the target's own params are odd; its diagnostics say why
                known = None
            declared = set(target.params.outputs) if isinstance(target.params.outputs, dict) else set()
            declared |= INTERNAL_OUTPUTS
            if known is not None and ref.key not in known | declared:
                out.warning("unknown-output", f"{{{ref.expr}}}: component '{ref.name}' has no output '{ref.key}' "
                            f"(it has {', '.join(sorted(known | declared)) or 'none'}); it reads as empty", cid, field)


def _check_reachable(plan: Plan, out: Collector) -> None:
    comps = plan.dsl.components
    if "begin" not in comps:
        return
    succ = _successors(plan, mentioned=True)
    for cid, entry in comps.items():      # container children are reached through their container
        if entry.parent_id:
            succ.setdefault(entry.parent_id, []).append(cid)
        node = plan.nodes.get(cid)
        for t in (getattr(node, "error_targets", lambda: [])() if node else []):
            succ.setdefault(cid, []).append(t)
    seen, stack = {"begin"}, ["begin"]
    while stack:
        for t in succ.get(stack.pop(), []):
            if t not in seen and t in comps:
                seen.add(t)
                stack.append(t)
    for cid in comps:
        if cid not in seen:
            out.warning("unreachable", "no path from 'begin' leads here, so it never runs", cid)


def _check_cycles(plan: Plan, out: Collector) -> None:
    """RAGFlow's editor refuses cycles; repetition only comes from Iteration and Loop."""
    comps = plan.dsl.components
    succ = {cid: [t for t in targets if t in comps] for cid, targets in _successors(plan).items()}
    WHITE, GREY, BLACK = 0, 1, 2
    color = {cid: WHITE for cid in plan.dsl.components}
    reported: set[frozenset] = set()
    for root in plan.dsl.components:
        if color[root] != WHITE:
            continue
        stack = [(root, iter(succ.get(root, [])))]
        path = [root]
        depth = {root: 0}         # position on `path` of each GREY component
        color[root] = GREY
        while stack:
            cid, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[cid] = BLACK
                stack.pop()
                path.pop()
                continue
            if color[nxt] == GREY and len(reported) < MAX_CYCLE_REPORTS:
                cycle = path[depth[nxt]:] + [nxt]
                key = frozenset(cycle)
                # a container repeats its body: a cycle whose members all lie inside one container
                # (an old explicit back-edge, or the implicit loop-back of nested containers) is fine
                inside_container = bool(set.intersection(*(_ancestors(comps, c) for c in cycle)))
                if key not in reported and not inside_container:
                    reported.add(key)
                    out.error("cycle", "downstream edges form a cycle outside any Iteration or Loop: " + " -> ".join(cycle),
                              nxt, "downstream")
            elif color[nxt] == WHITE:
                color[nxt] = GREY
                depth[nxt] = len(path)
                stack.append((nxt, iter(succ.get(nxt, []))))
                path.append(nxt)


def _ancestors(comps, cid: str) -> set[str]:
    """The containers around `cid` (its parent_id chain)."""
    found: set[str] = set()
    parent = comps[cid].parent_id
    while parent and parent in comps and parent not in found:
        found.add(parent)
        parent = comps[parent].parent_id
    return found
