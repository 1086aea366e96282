"""How two runs differ (at the parity checker's levels), and the smallest DSL that still differs that way.

`difference()` compares RAGFlow's events with canvas2graph's turn by turn with `check.compare`, and
names the difference by its level, what differs and the component types involved (ids stripped), so
that the same defect met in many DSLs counts once. `shrink()` removes components one at a time (the
upstream components are wired to the removed one's downstream, references to it read `sys.query`
instead), keeping a removal while the difference keeps its name.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Callable

from bench.differential.engines import checker

ID = re.compile(r"\b([A-Z][A-Za-z]+):[A-Za-z0-9_]+")
FIXED = ("begin", "IterationItem", "LoopItem")


@dataclass
class Difference:
    turn: int
    level: str                   # the highest level the turn still reached ("none" when not even text)
    reason: str                  # the checker's first mismatch

    @property
    def name(self) -> str:
        """The level missed, what differs and the component types named, without ids or values."""
        head = self.reason.split(":")[0]
        kinds = sorted(set(ID.findall(self.reason[:400])))
        return f"{head} [{', '.join(kinds)}]"


def difference(oracle: list[list[dict]], ours: list[list[dict]]) -> Difference | None:
    """The first turn that differs, or None when every turn holds at `order`."""
    check = checker()
    for n, (expected, actual) in enumerate(zip(oracle, ours), 1):
        reached, reason = check.compare(expected, actual)
        if reason:
            return Difference(n, reached or "none", reason)
    return None


def _replace_refs(value, gone: str):
    """`value` with every reference to `gone`'s outputs reading sys.query instead."""
    text = json.dumps(value, ensure_ascii=False)
    text = re.sub(r"\{" + re.escape(gone) + r"@[A-Za-z0-9_.]+\}", "{sys.query}", text)
    text = re.sub(r'"' + re.escape(gone) + r'@[A-Za-z0-9_.]+"', '"sys.query"', text)
    return json.loads(text)


def without(dsl: dict, gone: str) -> dict | None:
    """`dsl` without the component `gone` (and what it contains), its neighbours rewired; None if it is
    one that cannot go (Begin, a container's start)."""
    comps = dsl["components"]
    if gone not in comps or comps[gone]["obj"]["component_name"] in FIXED or gone == "begin":
        return None
    out = copy.deepcopy(dsl)
    comps = out["components"]
    removed = {gone} | {c for c, e in comps.items() if e.get("parent_id") == gone}
    after = [d for d in comps[gone]["downstream"] if d not in removed]
    for cid in removed:
        comps.pop(cid)
    for entry in comps.values():
        entry["downstream"] = list(dict.fromkeys(x for d in entry["downstream"] for x in (after if d in removed else [d])))
        params = entry["obj"]["params"]
        for key in ("end_cpn_ids", "exception_goto"):
            if isinstance(params.get(key), list):
                params[key] = list(dict.fromkeys(x for d in params[key] for x in (after if d in removed else [d])))
        for cond in params.get("conditions", []) or []:
            cond["to"] = list(dict.fromkeys(x for d in cond.get("to", []) for x in (after if d in removed else [d])))
        for cat in (params.get("category_description") or {}).values():
            cat["to"] = list(dict.fromkeys(x for d in cat.get("to", []) for x in (after if d in removed else [d])))
    for cid in removed:
        out = _replace_refs(out, cid)
    starts = [e for e in comps.values() if e["obj"]["component_name"] in ("IterationItem", "LoopItem")]
    if any(not e["downstream"] for e in starts):
        return None         # an empty body: a DSL both engines treat as broken, whatever the difference was
    return out


def shrink(dsl: dict, turns: list[dict], name: str, differs: Callable[[dict, list[dict]], Difference | None],
           budget: int = 40) -> dict:
    """The smallest DSL found (at most `budget` tries) whose runs still differ under the same `name`."""
    current = dsl
    changed = True
    while changed and budget > 0:
        changed = False
        for cid in sorted(current["components"], key=lambda c: -len(c)):
            candidate = without(current, cid)
            if candidate is None:
                continue
            budget -= 1
            try:
                found = differs(candidate, turns)
            except Exception:        # the smaller DSL does not compile, or an engine failed: keep looking
                found = None
            if found is not None and found.name == name:
                current, changed = candidate, True
                break
            if budget <= 0:
                break
    return current
